package lanehttp_test

import (
	"strconv"
	"testing"

	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/semaphore"
)

// usageCases are tails and what UsageJSON reports of them (-1: false).
var usageCases = []struct {
	tail string
	want int64
}{
	// OpenAI: total_tokens, or else prompt + completion.
	{`{"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":31}}`, 31},
	{`{"usage":{"prompt_tokens":10,"completion_tokens":20}}`, 30},
	{`{"usage": {
	  "prompt_tokens": 10,
	  "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": null},
	  "completion_tokens": 20,
	  "total_tokens": 30
	}}`, 30},
	{`{"usage":{"prompt_tokens":10}}`, -1},
	{`{"usage":{}}`, -1},
	// Anthropic: input + output; a stream's last output count takes the
	// input count of an earlier event.
	{`{"usage":{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":7}}`, 12},
	{"data: {\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\ndata: {\"usage\":{\"output_tokens\":300}}\n\n", 325},
	{"data: {\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}\n\ndata: {\"usage\":{\"output_tokens\":30}}\n\ndata: {\"usage\":{\"output_tokens\":300}}\n\n", 325},
	{"data: {\"usage\":{\"output_tokens\":300}}\n\n", -1}, // the input count left the tail
	{"data: {\"usage\":{\"input_tokens\":-1}}\n\ndata: {\"usage\":{\"output_tokens\":300}}\n\n", -1},
	// The last usage object counts; nulls and strings are passed over.
	{`{"usage":{"total_tokens":5}} {"usage":{"total_tokens":9}}`, 9},
	{`data: {"usage":{"total_tokens":5}}` + "\n\ndata: {\"usage\":null}\n\ndata: [DONE]\n\n", 5},
	{`{"usage":{"total_tokens":5},"text":"\"usage\":{\"total_tokens\":9}"}`, 5},
	{`{"usage":{"total_tokens":5},"field":"usage"}`, 5},
	{`{"usage":{"total_tokens":5}} {"usage":{"total_tokens":`, -1}, // the last one is cut off
	// Counts: plain non-negative integers up to semaphore.MaxCapacity.
	{`{"usage":{"total_tokens":0}}`, 0},
	{`{"usage":{"total_tokens":` + strconv.FormatInt(semaphore.MaxCapacity, 10) + `}}`, semaphore.MaxCapacity},
	{`{"usage":{"total_tokens":` + strconv.FormatInt(semaphore.MaxCapacity+1, 10) + `}}`, -1},
	{`{"usage":{"total_tokens":99999999999999999999999}}`, -1},
	{`{"usage":{"total_tokens":-1}}`, -1},
	{`{"usage":{"total_tokens":1.5}}`, -1},
	{`{"usage":{"total_tokens":1e3}}`, -1},
	{`{"usage":{"total_tokens":007}}`, -1},
	{`{"usage":{"total_tokens":null}}`, -1},
	{`{"usage":{"total_tokens":"7"}}`, -1},
	{`{"usage":{"total_tokens":7`, -1},
	// Not JSON.
	{``, -1},
	{`usage`, -1},
	{`"usage"`, -1},
	{`"usage":{`, -1},
	{`"usage":{"a":[1,{"b":"}"}],"total_tokens":4}`, 4},
	{`"usage":{"a":[1,{"b":"}"}],"total_tokens":4 x}`, -1},
	{`"usage":{"a" "total_tokens":4}`, -1},
}

// TestUsageJSON: UsageJSON reads OpenAI's and Anthropic's usage, whole
// and streamed, and refuses what it cannot read exactly.
func TestUsageJSON(t *testing.T) {
	for _, c := range usageCases {
		n, ok := lanehttp.UsageJSON(nil, []byte(c.tail))
		if !ok {
			n = -1
		}
		if n != c.want {
			t.Errorf("UsageJSON(%q) = %d, %v; want %d (-1: false)", c.tail, n, ok, c.want)
		}
	}
}

// TestUsageJSONAllocs: UsageJSON allocates nothing.
func TestUsageJSONAllocs(t *testing.T) {
	b := []byte("data: {\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}\n\ndata: {\"usage\":{\"output_tokens\":300,\"x\":{\"y\":[1,\"z\"]}}}\n\n")
	if a := testing.AllocsPerRun(100, func() { lanehttp.UsageJSON(nil, b) }); a != 0 {
		t.Errorf("UsageJSON allocates %v times a call; want 0", a)
	}
}

// FuzzUsageJSON: whatever the bytes, UsageJSON does not panic and
// reports a count within [0, 2×semaphore.MaxCapacity] (0 with false);
// and an event with a total after them, on a line of its own, is what it
// reports.
func FuzzUsageJSON(f *testing.F) {
	for _, c := range usageCases {
		f.Add(c.tail, int64(c.want))
	}
	f.Fuzz(func(t *testing.T, tail string, total int64) {
		n, ok := lanehttp.UsageJSON(nil, []byte(tail))
		if n < 0 || n > 2*semaphore.MaxCapacity || (!ok && n != 0) {
			t.Fatalf("UsageJSON(%q) = %d, %v; want a count in [0, 2×MaxCapacity], 0 with false", tail, n, ok)
		}
		total = max(0, total%(semaphore.MaxCapacity+1))
		last := tail + "\n\ndata: {\"usage\":{\"total_tokens\":" + strconv.FormatInt(total, 10) + "}}\n\n"
		if n, ok := lanehttp.UsageJSON(nil, []byte(last)); !ok || n != total {
			t.Fatalf("UsageJSON(%q) = %d, %v; want the last event's %d", last, n, ok, total)
		}
	})
}
