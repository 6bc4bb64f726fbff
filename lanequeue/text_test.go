package lanequeue_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
)

var _ encoding.TextMarshaler = lanequeue.Kind(0)

// A Kind goes to JSON and to slog's handlers as its name: a lane's Stats
// and a holder in a dashboard feed, a kind in a log line.
func TestKindMarshalsAsText(t *testing.T) {
	for _, k := range []lanequeue.Kind{lanequeue.Keyed, lanequeue.Global, lanequeue.Rate} {
		b, err := json.Marshal(k)
		if err != nil || string(b) != `"`+k.String()+`"` {
			t.Fatalf("json.Marshal(%v) = %s, %v", k, b, err)
		}
	}
	b, err := json.Marshal(lanequeue.LaneStats{Name: "global", Kind: lanequeue.Global, Capacity: 4})
	if err != nil || !json.Valid(b) || !strings.Contains(string(b), `"Kind":"global"`) {
		t.Fatalf("LaneStats in JSON: %s, %v", b, err)
	}
	b, err = json.Marshal(lanequeue.Holder[string]{Lane: "session", Kind: lanequeue.Keyed, Key: "a", Weight: 1})
	if err != nil || !json.Valid(b) || !strings.Contains(string(b), `"Kind":"keyed"`) {
		t.Fatalf("a Holder in JSON: %s, %v", b, err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "kind", lanequeue.Rate)
	if !strings.Contains(buf.String(), "kind=rate") {
		t.Fatalf("slog text line %q; want kind=rate", buf.String())
	}
	// An unknown value is an error, not a number passed off as a name.
	if _, err := json.Marshal(lanequeue.Kind(9)); err == nil {
		t.Error("json.Marshal(Kind(9)) succeeded")
	}
}
