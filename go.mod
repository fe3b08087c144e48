module github.com/breakwater-go/breakwater

go 1.25.0

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/hashicorp/go-retryablehttp v0.7.8
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

require github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
