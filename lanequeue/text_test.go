package lanequeue_test

import (
	"encoding"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
)

var (
	_ encoding.TextMarshaler   = lanequeue.Kind(0)
	_ encoding.TextUnmarshaler = new(lanequeue.Kind)
	_ encoding.TextMarshaler   = lanequeue.EventKind(0)
	_ encoding.TextUnmarshaler = new(lanequeue.EventKind)
)

// Kinds and event kinds go to JSON as their names and come back.
func TestEnumsMarshalAsText(t *testing.T) {
	for _, k := range []lanequeue.Kind{lanequeue.Keyed, lanequeue.Global, lanequeue.Rate} {
		b, err := json.Marshal(k)
		if err != nil || string(b) != `"`+k.String()+`"` {
			t.Fatalf("json.Marshal(%v) = %s, %v", k, b, err)
		}
		var back lanequeue.Kind = 7
		if err := json.Unmarshal(b, &back); err != nil || back != k {
			t.Fatalf("json.Unmarshal(%s) = %v, %v; want %v", b, back, err, k)
		}
	}
	for _, k := range []lanequeue.EventKind{lanequeue.SlowWait, lanequeue.LongHold, lanequeue.Rejected} {
		b, err := json.Marshal(k)
		if err != nil || string(b) != `"`+k.String()+`"` {
			t.Fatalf("json.Marshal(%v) = %s, %v", k, b, err)
		}
		var back lanequeue.EventKind
		if err := json.Unmarshal(b, &back); err != nil || back != k {
			t.Fatalf("json.Unmarshal(%s) = %v, %v; want %v", b, back, err, k)
		}
	}
	// A holder in a JSON feed names its kind.
	b, err := json.Marshal(lanequeue.Holder[string]{Lane: "session", Kind: lanequeue.Keyed, Key: "a", Weight: 1})
	if err != nil || !json.Valid(b) || !strings.Contains(string(b), `"Kind":"keyed"`) {
		t.Fatalf("a Holder in JSON: %s, %v", b, err)
	}
	// Unknown values and names are errors, and leave the value alone.
	if _, err := json.Marshal(lanequeue.Kind(9)); err == nil {
		t.Error("json.Marshal(Kind(9)) succeeded")
	}
	if _, err := lanequeue.EventKind(0).MarshalText(); err == nil {
		t.Error("EventKind(0).MarshalText succeeded")
	}
	k := lanequeue.Global
	if err := k.UnmarshalText([]byte("Keyed")); err == nil || k != lanequeue.Global {
		t.Errorf("UnmarshalText(Keyed): %v, kind now %v; want an error, global", err, k)
	}
	ek := lanequeue.LongHold
	if err := ek.UnmarshalText([]byte("")); err == nil || ek != lanequeue.LongHold {
		t.Errorf("UnmarshalText(\"\"): %v, kind now %v; want an error, long-hold", err, ek)
	}
}
