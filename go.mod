module github.com/sessionlane/lanes

go 1.24.0

require (
	github.com/puzpuzpuz/xsync/v4 v4.5.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.19.0
	golang.org/x/time v0.14.0
	pgregory.net/rapid v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
