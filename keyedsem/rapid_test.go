package keyedsem_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/keyedsem"
)

// TestKeyedMatchesModel checks random sequences of operations against the
// sequential model (see modelcheck.Keyed, which FuzzKeyed runs too), with
// keyedsem.Has to settle ties between entries that went idle at the same
// instant. A failure prints the steps and the seed; -rapid.seed replays
// it, and -rapid.checks=1000 -rapid.steps=100 searches longer.
func TestKeyedMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.Keyed(keyedsem.Has[string]))
}

// hangGuard bounds the wait for a result that must come; it only turns a
// hang into a failure, and is not a speed check.
const hangGuard = time.Minute
