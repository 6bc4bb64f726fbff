package semaphore_test

import (
	"reflect"
	"testing"

	"github.com/sessionlane/lanes/semaphore"
)

// Regression (review of the permit API): no exported method may lead from a
// Permit or a semaphore to the methods that give permits back, or a user
// could return permits that are still held and let two callers in.
func TestNoBackDoorToTheReleasePath(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeOf(semaphore.Permit{}),
		reflect.TypeOf(&semaphore.Permit{}),
		reflect.TypeOf(&semaphore.Weighted{}),
	} {
		for _, name := range []string{"Token", "Owner", "ReleaseToken", "WakeAfterRelease", "CountDoubleRelease"} {
			if _, ok := typ.MethodByName(name); ok {
				t.Errorf("%v has an exported method %s", typ, name)
			}
		}
	}
}
