package lanehttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unsafe"

	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
)

// TestOverLongKeyIs400AndReachesNoLane (issue 22, defect 7): a key longer
// than DefaultMaxKeyBytes (up to a megabyte, a header's worth) answers
// 400, is never admitted and never enters the keyed lane, which would
// otherwise keep it, idle, for its idle timeout; a key of exactly the bound
// is served.
func TestOverLongKeyIs400AndReachesNoLane(t *testing.T) {
	t.Parallel()
	for _, n := range []int{lanehttp.DefaultMaxKeyBytes + 1, 1 << 20} {
		f := newFixture(t)
		w := serve(f.h, request(context.Background(), strings.Repeat("k", n)))
		if w.Code != http.StatusBadRequest || f.calls.Load() != 0 {
			t.Errorf("key of %d bytes: answer %d, %d handler calls; want 400 and no call", n, w.Code, f.calls.Load())
		}
		for _, lane := range []string{"session", "global"} {
			if st := stats(t, f.q, lane); st.Keys != 0 || st.Acquired != 0 || st.Held != 0 || st.Waiters != 0 {
				t.Errorf("key of %d bytes: lane %q has %d keys, %d acquired, %d held, %d waiting; want nothing", n, lane, st.Keys, st.Acquired, st.Held, st.Waiters)
			}
		}
		nothingHeld(t, f.q)
	}

	f := newFixture(t)
	key := strings.Repeat("k", lanehttp.DefaultMaxKeyBytes)
	if w := serve(f.h, request(context.Background(), key)); w.Code != http.StatusOK || w.Body.String() != "ok "+key {
		t.Fatalf("key of DefaultMaxKeyBytes: answer %d; want 200", w.Code)
	}
	if st := stats(t, f.q, "session"); st.Acquired != 1 {
		t.Fatalf("key of DefaultMaxKeyBytes: the session lane granted %d; want 1", st.Acquired)
	}
	nothingHeld(t, f.q)
}

// TestMaxKeyBytes: Config.MaxKeyBytes sets the bound, Reject is told
// ErrKeyTooLong with the 400, and a key that is a struct counts the bytes
// of all its strings.
func TestMaxKeyBytes(t *testing.T) {
	t.Parallel()
	type tenantSession struct {
		Tenant, Session string
		Shard           int // fixed size: not counted
	}
	q := lanequeue.Default[tenantSession](4)
	t.Cleanup(q.Close)
	set, err := q.Lanes("session", "global")
	must(t, err)
	var (
		rejected error
		status   int
		calls    int
	)
	h := lanehttp.Handler(lanehttp.Config[tenantSession]{
		Queue: q, Lanes: set, MaxKeyBytes: 8,
		Key: func(r *http.Request) (tenantSession, error) {
			return tenantSession{r.Header.Get("X-Tenant"), r.Header.Get("X-Session"), 7}, nil
		},
		Reject: func(w http.ResponseWriter, r *http.Request, st int, err error) {
			rejected, status = err, st
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge) // this server knows its keys are headers
		},
	}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
	for _, c := range []struct {
		tenant, session string
		want            int
	}{
		{"acme", "abcd", http.StatusOK},                           // 8 bytes
		{"acme", "abcde", http.StatusRequestHeaderFieldsTooLarge}, // 9
		{"", "abcdefgh", http.StatusOK},                           // 8
		{"acme-corp", "", http.StatusRequestHeaderFieldsTooLarge}, // 9
	} {
		rejected, status, calls = nil, 0, 0
		r := request(context.Background(), "")
		r.Header.Set("X-Tenant", c.tenant)
		r.Header.Set("X-Session", c.session)
		w := serve(h, r)
		if w.Code != c.want {
			t.Errorf("key {%q, %q}: answer %d; want %d", c.tenant, c.session, w.Code, c.want)
		}
		tooLong := c.want != http.StatusOK
		if tooLong != errors.Is(rejected, lanehttp.ErrKeyTooLong) || tooLong && status != http.StatusBadRequest || tooLong == (calls == 1) {
			t.Errorf("key {%q, %q}: Reject saw %d %v, %d handler calls", c.tenant, c.session, status, rejected, calls)
		}
	}
	for _, st := range q.Stats() {
		if st.Acquired != 2 || st.Held != 0 {
			t.Errorf("lane %q: %d acquired, %d held; want the 2 keys within the bound, given back", st.Name, st.Acquired, st.Held)
		}
	}
}

// TestKeyBytesCountsEveryString: a key's bytes, for MaxKeyBytes, are its
// strings' lengths wherever they sit (a named string type, struct fields,
// array elements, an interface's value), and nothing else.
func TestKeyBytesCountsEveryString(t *testing.T) {
	t.Parallel()
	type id string
	type pair struct {
		A string
		B any
		N int
	}
	s := "abcd"
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"string", lanehttp.KeyBytes("abcdef"), 6},
		{"named string", lanehttp.KeyBytes(id("abc")), 3},
		{"int", lanehttp.KeyBytes(12345), 0},
		{"pointer", lanehttp.KeyBytes(&s), 0},
		{"struct", lanehttp.KeyBytes(pair{"ab", "cde", 9}), 5},
		{"struct with a nil interface", lanehttp.KeyBytes(pair{"ab", nil, 9}), 2},
		{"array", lanehttp.KeyBytes([3]string{"a", "bb", "ccc"}), 6},
		{"array of numbers", lanehttp.KeyBytes([4]int{1, 2, 3, 4}), 0},
		{"any holding a string", lanehttp.KeyBytes[any]("abcd"), 4},
		{"any holding a struct", lanehttp.KeyBytes[any](pair{"ab", [2]any{"c", 1}, 0}), 3},
		{"nil any", lanehttp.KeyBytes[any](nil), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes; want %d", c.name, c.got, c.want)
		}
	}
}

// TestKeyCutFromALongHeaderKeepsNoneOfIt (from the review of defect 7's
// fix): a key within the bound that Key cut from a header of a megabyte
// (strings.Cut of an Authorization-like value) must not keep the header's
// bytes alive in the keyed lane: the lane holds a copy. The handler looks
// at the key the session lane lists for its ticket and checks that its
// bytes lie outside the header's.
func TestKeyCutFromALongHeaderKeepsNoneOfIt(t *testing.T) {
	t.Parallel()
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	set, err := q.Lanes("session", "global")
	must(t, err)
	header := "thread-7." + strings.Repeat("x", 1<<20)
	start := uintptr(unsafe.Pointer(unsafe.StringData(header)))
	end := start + uintptr(len(header))
	var listed []string
	h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set,
		Key: func(r *http.Request) (string, error) {
			k, _, _ := strings.Cut(r.Header.Get("X-Auth"), ".")
			return k, nil
		}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range q.Holders() {
			if h.Lane == "session" {
				listed = append(listed, h.Key)
			}
		}
	}))
	r := request(context.Background(), "")
	r.Header.Set("X-Auth", header)
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Fatalf("answer %d; want 200", w.Code)
	}
	if len(listed) != 1 || listed[0] != "thread-7" {
		t.Fatalf("the session lane listed keys %q; want [thread-7]", listed)
	}
	if p := uintptr(unsafe.Pointer(unsafe.StringData(listed[0]))); p >= start && p < end {
		t.Fatal("the keyed lane's key shares the header's bytes: an idle key would keep the whole megabyte alive")
	}
}
