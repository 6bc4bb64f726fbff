package redistest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/redislane/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMaxInUse(t *testing.T) {
	for _, c := range []struct {
		name  string
		spans []redistest.Span
		want  int64
	}{
		{"none", nil, 0},
		{"apart", []redistest.Span{{0, 10, 2}, {20, 30, 3}}, 3},
		{"overlapping", []redistest.Span{{0, 10, 2}, {5, 30, 3}, {8, 9, 1}}, 6},
		{"touching count as overlapping", []redistest.Span{{0, 10, 1}, {10, 20, 1}}, 2},
	} {
		if got := redistest.MaxInUse(c.spans); got != c.want {
			t.Errorf("%s: MaxInUse = %d, want %d", c.name, got, c.want)
		}
	}
}
