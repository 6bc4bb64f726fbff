package nan_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/nan"
	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type thread struct{ Channel, ID string }
type scored struct {
	ID    string
	Score float64
}
type nested struct {
	T thread
	A [2]struct{ X any }
}

func TestPossibleKnowsWhichKeyTypesCanHoldANaN(t *testing.T) {
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"string", nan.Possible[string](), false},
		{"int", nan.Possible[int](), false},
		{"pointer", nan.Possible[*int](), false},
		{"struct of strings", nan.Possible[thread](), false},
		{"empty array of floats", nan.Possible[[0]float64](), false},
		{"float64", nan.Possible[float64](), true},
		{"float32", nan.Possible[float32](), true},
		{"complex128", nan.Possible[complex128](), true},
		{"any", nan.Possible[any](), true},
		{"struct with a float", nan.Possible[scored](), true},
		{"array of floats", nan.Possible[[3]float64](), true},
		{"struct with an array of structs holding any", nan.Possible[nested](), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: Possible = %v, want %v", c.name, c.got, c.want)
		}
	}
}
