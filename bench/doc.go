// Package bench measures lanes side by side with the libraries a user would
// pick instead, in one `go test -bench` run, so that every published figure
// compares like with like on one machine at one time.
//
// It is a nested module so that the peers (golang.org/x/sync/semaphore,
// github.com/marusama/semaphore/v2, github.com/moby/locker,
// k8s.io/utils/keymutex) never enter the requirements of the lanes module.
// It has no API: the benchmarks and the tests that keep them honest live in
// its _test.go files, and cmd/report turns a run into docs/benchmarks.md and
// the charts in docs/.
//
// Sub-benchmark names are key=value pairs ending in impl=NAME, so that
//
//	go test -run '^$' -bench . -benchmem -count 10 . > new.txt
//	go tool benchstat -col /impl new.txt
//
// prints one column per implementation.
//
// Benchmarks:
//
//   - BenchmarkSemaphore: one semaphore, uncontended and under 2 to 64
//     goroutines (capacity 8 and 1), and weighted requests 8,1,1,1 at
//     capacity 10; lanes, x/sync, marusama, a buffered channel, sync.Mutex.
//   - BenchmarkKeyed: per-key locks with distinct keys, one hot key, and a
//     new key every operation (with a key-building baseline to subtract).
//   - BenchmarkKeyedMemory: retained heap per idle key after 100k keys, and
//     per peak key after a burst of 100k keys held at once.
//   - BenchmarkGateway and BenchmarkGatewayKeys: 256 goroutines sending
//     messages for 64 threads (or 1..64), each handled in a critical
//     section that waits or computes; throughput and the speed-up over one
//     global lane of capacity 1.
//   - BenchmarkAcquireAll: lanequeue's session + global, with a prepared
//     lane set, against its parts: one keyed and one global
//     Acquire+Release.
//
// TestKeyedPeersExclude checks that every keyed peer measured here really
// excludes per key, so that a fast but wrong peer cannot win.
package bench
