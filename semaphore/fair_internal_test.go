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
	bd := f.bandOf(0)
	f.served(0, 10, &a)
	f.served(0, 3, &b)
	f.served(0, 5, &c)
	f.unserved(0, 10, &a)
	if bd.v != 5 {
		t.Fatalf("v = %d after the grant of key 10 was given back; want 5, the largest key of the others", bd.v)
	}
	f.unserved(0, 5, &c) // a second one: v stays
	if bd.v != 5 {
		t.Fatalf("v = %d after a second grant given back; want 5 kept", bd.v)
	}

	f = newFairQueue(nil)
	bd = f.bandOf(0)
	f.served(0, 10, &a)
	f.served(0, 12, &d)
	f.unserved(0, 10, &a) // not the grant whose key v holds
	if bd.v != 12 {
		t.Fatalf("v = %d; want 12, the key of a grant that reached its waiter", bd.v)
	}

	// Each band has its v: a grant of band 1 given back moves band 1's
	// only.
	f = newFairQueue(nil)
	b0, b1 := f.bandOf(0), f.bandOf(1)
	f.served(0, 7, &a)
	f.served(1, 4, &b)
	f.served(1, 9, &c)
	f.unserved(1, 9, &c)
	if b0.v != 7 || b1.v != 4 {
		t.Fatalf("v = %d and %d after band 1's grant of key 9 was given back; want 7 and 4", b0.v, b1.v)
	}

	// A token is reused by the next grant, of any band: band 0's top still
	// names a, whose grant (key 7) reached its waiter, when band 1's grant
	// through the same token is given back. Band 0's v stays.
	f = newFairQueue(nil)
	b0, b1 = f.bandOf(0), f.bandOf(1)
	f.served(0, 3, &b)
	f.served(0, 7, &a)
	f.served(1, 2, &a)
	f.unserved(1, 2, &a)
	if b0.v != 7 || b1.v != 0 {
		t.Fatalf("v = %d and %d after band 1's grant through band 0's last token was given back; want 7 and 0", b0.v, b1.v)
	}
}
