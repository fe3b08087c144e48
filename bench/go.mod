module github.com/breakwater-go/breakwater/bench

go 1.25.0

replace github.com/breakwater-go/breakwater => ../

require (
	github.com/afex/hystrix-go v0.0.0-20180502004556-fa1af6a1f4f5
	github.com/breakwater-go/breakwater v0.2.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/eapache/go-resiliency v1.7.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-chi/httprate v0.16.1
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/breakwater-go/breakwater/redisstore v0.2.0
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/smartystreets/goconvey v1.8.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/breakwater-go/breakwater/redisstore => ../redisstore
