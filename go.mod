module github.com/breakwater-go/breakwater

go 1.25

require go.uber.org/goleak v1.3.0
