package semaphore_test

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// A histogram of a semaphore made WithHistograms, read as a dashboard
// would: counts per bucket, the mean, and quantiles estimated from the
// buckets. Here the histogram is built by hand: 90 waits of under 1µs
// (grants that did not queue) and 10 of between 200ms and 500ms.
func ExampleHistogram_Quantile() {
	var h semaphore.Histogram
	bounds := semaphore.HistogramBounds()
	h.Counts[0], h.Counts[17] = 90, 10 // bounds[17] is 500ms
	h.Count, h.Sum = 100, 3*time.Second
	fmt.Println("bucket 17 holds waits up to", bounds[17])
	fmt.Println("mean:", h.Sum/time.Duration(h.Count))
	fmt.Println("p50:", h.Quantile(0.5))
	fmt.Println("p95:", h.Quantile(0.95))
	// Output:
	// bucket 17 holds waits up to 500ms
	// mean: 30ms
	// p50: 555ns
	// p95: 350ms
}
