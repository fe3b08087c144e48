module github.com/breakwater-go/breakwater/e2e

go 1.25.0

require (
	github.com/breakwater-go/breakwater v0.2.0
	github.com/chromedp/chromedp v0.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace github.com/breakwater-go/breakwater => ../
