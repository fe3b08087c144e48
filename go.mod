module github.com/breakwater-go/breakwater

go 1.25
