module github.com/breakwater-go/breakwater/redisstore

go 1.25.0

replace github.com/breakwater-go/breakwater => ../

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/breakwater-go/breakwater v0.2.0
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
