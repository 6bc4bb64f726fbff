package stripe_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/stripe"
)

// The ablation of Hint: a striped counter, one padded atomic per stripe,
// added to from g goroutines at once (internal/hist's Observe and
// lanequeue's drain count do this), with the stripe picked by Hint, by an
// atomic round-robin counter, by math/rand/v2 (per-thread state, no
// shared line) and always the first (no striping). docs/internals.md has
// the figures of this and of the rows that use Hint.

const ablationBits = 3

type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

var roundRobin atomic.Uint64

func BenchmarkAblationHint(b *testing.B) {
	picks := []struct {
		name string
		pick func() uint
	}{
		{"stack", func() uint { return stripe.Hint(ablationBits) }},
		{"roundrobin", func() uint { return uint(roundRobin.Add(1)) & (1<<ablationBits - 1) }},
		{"rand", func() uint { return uint(rand.Uint64() >> (64 - ablationBits)) }},
		{"fixed", func() uint { return 0 }},
	}
	for _, g := range []int{1, 2, 32} {
		for _, p := range picks {
			b.Run("g="+strconv.Itoa(g)+"/pick="+p.name, func(b *testing.B) {
				var counts [1 << ablationBits]paddedCount
				pick := p.pick
				if g == 1 {
					for b.Loop() {
						counts[pick()].n.Add(1)
					}
					return
				}
				b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						counts[pick()].n.Add(1)
					}
				})
			})
		}
	}
}
