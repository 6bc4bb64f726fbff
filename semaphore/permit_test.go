package semaphore_test

import (
	"reflect"
	"testing"

	"github.com/sessionlane/lanes/semaphore"
)

// Permit is a type of package semaphore, where go doc finds it and its
// methods (issue 13), and keyedsem returns it.
func TestPermitIsSemaphoresOwnType(t *testing.T) {
	pt := reflect.TypeOf(semaphore.Permit{})
	if pt.PkgPath() != "github.com/sessionlane/lanes/semaphore" || pt.Name() != "Permit" {
		t.Fatalf("semaphore.Permit is %s.%s", pt.PkgPath(), pt.Name())
	}
	if reflect.TypeOf(semaphore.Permit{}) != pt {
		t.Fatal("semaphore.Permit is not semaphore.Permit")
	}
	for _, m := range []string{"Release", "Weight"} {
		if _, ok := pt.MethodByName(m); !ok {
			t.Fatalf("semaphore.Permit has no method %s", m)
		}
	}
}
