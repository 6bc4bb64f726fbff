package call_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/call"
)

func TestReadLastOfAKindCounts(t *testing.T) {
	c, bad := call.Read([]call.Option{
		call.Make(call.KindPriority, "", call.MaxPriority+1), // replaced by the next
		call.Make(call.KindPriority, "", 2),
		call.Make(call.KindGroup, "a", 0),
		call.Make(call.KindGroup, "b", 0),
		call.Make(call.KindSequence, "", 7),
		call.Make(call.KindWeight, "", 3),
	})
	want := call.Call{Turn: call.Turn{Priority: 2, Sequence: 7, Group: "b"}, Weight: 3, WeightSet: true}
	if bad != call.BadNone || c != want {
		t.Fatalf("Read = %+v, %v; want %+v", c, bad, want)
	}
	if _, bad := call.Read([]call.Option{call.Make(call.KindPriority, "", 2), call.Make(call.KindPriority, "", -call.MaxPriority-1)}); bad != call.BadPriority {
		t.Fatalf("a last priority out of range: %v; want BadPriority", bad)
	}
}

func TestReadOptionsThatSetNothing(t *testing.T) {
	c, bad := call.Read([]call.Option{{}, call.Make(call.KindPriority, "", 0), call.Make(call.KindGroup, "", 0)})
	if bad != call.BadNone || c != (call.Call{}) {
		t.Fatalf("Read = %+v, %v; want the zero Call", c, bad)
	}
}

func TestReadFlags(t *testing.T) {
	c, _ := call.Read([]call.Option{call.Make(call.KindWeight, "tpm", 5), call.Lenient})
	if !c.LaneWeight || c.WeightSet || !c.Lenient {
		t.Fatalf("Read = %+v; want LaneWeight and Lenient, no weight for every lane", c)
	}
	o := call.Make(call.KindWeight, "tpm", 5)
	if call.KindOf(o) != call.KindWeight || call.LaneOf(o) != "tpm" || call.NOf(o) != 5 {
		t.Fatalf("accessors of %v", o)
	}
}
