package semaphore

import (
	"testing"

	"github.com/sessionlane/lanes/internal/permit"
)

// A grant given back is taken as if its waiter had left first, also when
// later grants with smaller keys were served after it (priorities serve
// fair-share keys out of order): the virtual time goes back to the largest
// of their keys, not to the key of the grant that never reached its
// waiter. Before, v stayed there (the composed model found it, seed
// 9648483930778181851). A second grant given back leaves v as it is
// (so does a join since the grant, which the models check).
func TestFairVirtualTimeAfterAGrantGivenBack(t *testing.T) {
	var a, b, c, d permit.Token
	f := newFairQueue(nil)
	f.served(10, &a)
	f.served(3, &b)
	f.served(5, &c)
	f.unserved(&a)
	if f.v != 5 {
		t.Fatalf("v = %d after the grant of key 10 was given back; want 5, the largest key of the others", f.v)
	}
	f.unserved(&c) // a second one: v stays
	if f.v != 5 {
		t.Fatalf("v = %d after a second grant given back; want 5 kept", f.v)
	}

	f = newFairQueue(nil)
	f.served(10, &a)
	f.served(12, &d)
	f.unserved(&a) // not the grant whose key v holds
	if f.v != 12 {
		t.Fatalf("v = %d; want 12, the key of a grant that reached its waiter", f.v)
	}
}
