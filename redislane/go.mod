module github.com/sessionlane/lanes/redislane

go 1.24.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sessionlane/lanes v0.0.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.30.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/puzpuzpuz/xsync/v4 v4.5.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/time v0.14.0 // indirect
)

replace github.com/sessionlane/lanes => ../
