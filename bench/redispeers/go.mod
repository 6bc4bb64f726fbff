module github.com/sessionlane/lanes/bench/redispeers

go 1.24.9

replace (
	github.com/sessionlane/lanes => ../..
	github.com/sessionlane/lanes/redislane => ../../redislane
)

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.16.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sessionlane/lanes/redislane v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/puzpuzpuz/xsync/v4 v4.5.0 // indirect
	github.com/sessionlane/lanes v0.0.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)
