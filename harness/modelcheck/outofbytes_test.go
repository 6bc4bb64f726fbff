package modelcheck

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// The end-of-run checks of a fuzz input that runs out of bytes rest on
// outOfBytes recognising rapid's panic for it by its type's name, an
// unexported detail of rapid: this test fails if an upgrade of rapid
// renames it, instead of letting those checks stop running in silence.
func TestOutOfBytesRecognisesRapidsPanic(t *testing.T) {
	var seen any
	fuzz := rapid.MakeFuzz(func(t *rapid.T) {
		defer func() {
			seen = recover()
			if seen != nil {
				panic(seen)
			}
		}()
		rapid.Uint64().Draw(t, "more than the input holds")
	})
	// No bytes: the first draw runs out, and rapid skips the input (the
	// subtest), after the property has seen the panic.
	t.Run("empty input", func(t *testing.T) { fuzz(t, nil) })
	if seen == nil || !outOfBytes(seen) {
		t.Fatalf("rapid's panic for an input out of bytes is %T (%v); outOfBytes does not recognise it", seen, seen)
	}
}
