package nilptr_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type thing struct{}

func (*thing) Do() {}

type doer interface{ Do() }

// TestIs: a nil interface and one holding a nil pointer are nil; a
// pointer to a value, and a value that is no pointer, are not.
func TestIs(t *testing.T) {
	var nilDoer doer
	var nilThing *thing
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil interface", nilDoer, true},
		{"interface holding a nil pointer", doer(nilThing), true},
		{"nil pointer", nilThing, true},
		{"pointer", &thing{}, false},
		{"interface holding a pointer", doer(&thing{}), false},
		{"value", 3, false},
		{"struct value", thing{}, false},
		{"nil func", (func())(nil), true},
		{"func", func() {}, false},
		{"nil slice", []int(nil), false},
	} {
		if got := nilptr.Is(c.v); got != c.want {
			t.Errorf("%s: Is = %v; want %v", c.name, got, c.want)
		}
	}
}
