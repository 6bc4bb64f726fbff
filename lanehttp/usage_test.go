package lanehttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Each call of a tokenRig estimates estimate tokens of a budget of
// budget a minute.
const (
	budget   = 1000
	estimate = 100
)

// tokenRig is a provider on loopback that answers every request with
// answer, and a client for it through a Transport over a token lane,
// "tpm", and a global lane of 1, "provider", whose Usage is UsageJSON; the queue's clock is a fake one that
// the test never moves, so nothing leaves the window.
type tokenRig struct {
	q      *lanequeue.Queue[string]
	set    lanequeue.LaneSet[string]
	clk    *clock.Fake // the queue's clock
	srv    *httptest.Server
	client *http.Client

	mu    sync.Mutex
	tails [][]byte // what each call of Usage was given
}

// newTokenRig starts the rig; usage, if given, is what the transport's
// Usage calls instead of UsageJSON.
func newTokenRig(t *testing.T, answer func(w http.ResponseWriter), usage ...func(*http.Response, []byte) (int64, bool)) *tokenRig {
	t.Helper()
	read := lanehttp.UsageJSON
	if len(usage) > 0 {
		read = usage[0]
	}
	g := &tokenRig{q: lanequeue.New[string]()}
	g.clk = clock.NewFake(received)
	g.q.SetClock(g.clk)
	must(t, g.q.Add("tpm", lanequeue.NewTokenLane[string](budget)))
	must(t, g.q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(1)))) // shows whether a call is held
	set, err := g.q.Lanes("provider", "tpm")
	must(t, err)
	g.set = set
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		answer(w)
	}))
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base:  g.srv.Client().Transport,
		Queue: g.q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return estimate },
		Usage: func(resp *http.Response, tail []byte) (int64, bool) {
			g.mu.Lock()
			g.tails = append(g.tails, bytes.Clone(tail))
			g.mu.Unlock()
			return read(resp, tail)
		},
	})
	g.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		g.client.CloseIdleConnections()
		g.srv.Close()
		g.q.Close()
	})
	return g
}

// call sends a request and returns its response, whose body the test
// reads and closes.
func (g *tokenRig) call(t *testing.T) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, g.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	must(t, err)
	resp, err := g.client.Do(req)
	must(t, err)
	return resp
}

// usageCalls returns what Usage was given, each call's tail.
func (g *tokenRig) usageCalls() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tails
}

// wantRoom checks that the token lane has exactly room tokens left in
// the window (after the calls were settled and released): a call of
// room+1 does not fit and one of room does. It takes that room.
func (g *tokenRig) wantRoom(t *testing.T, room int64) {
	t.Helper()
	try := func(n int64) bool {
		tk, ok := g.q.TryAcquireAll("", g.set, lanequeue.LaneWeight("tpm", n))
		if ok {
			tk.Release()
		}
		return ok
	}
	nothingHeld(t, g.q)
	if try(room + 1) {
		t.Errorf("a call of %d tokens fits; want %d tokens left of %d (used %d)", room+1, room, budget, budget-room)
		return
	}
	if room > 0 && !try(room) {
		t.Errorf("a call of %d tokens does not fit; want %d tokens left of %d (used %d)", room, room, budget, budget-room)
	}
}

// openAI is a whole answer of OpenAI's chat completions with usage.
func openAI(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the \"usage\": {\"total_tokens\": 1}"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}}`+"\n",
		prompt, completion, prompt+completion)
}

func writeString(s string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { io.WriteString(w, s) }
}

// TestTransportUsageSettles: a call read to its end is settled to the
// usage of its answer before its lanes are released: above the estimate
// a debt (the next calls have less room, or none when it passes the
// budget), below a refund (the next calls have more).
func TestTransportUsageSettles(t *testing.T) {
	for _, c := range []struct {
		name     string
		used     int // prompt 10 + completion used-10
		wantRoom int64
	}{
		{"debt", 700, budget - 700},
		{"refund", 40, budget - 40},
		{"past the budget", 1500, 0},
		{"exactly the estimate", estimate, budget - estimate},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newTokenRig(t, writeString(openAI(10, c.used-10)))
			resp := g.call(t)
			if got, want := readAll(t, resp), openAI(10, c.used-10); got != want {
				t.Fatalf("the caller read %q; want the answer unchanged, %q", got, want)
			}
			g.wantRoom(t, c.wantRoom)
			if n := len(g.usageCalls()); n != 1 {
				t.Errorf("Usage called %d times; want once", n)
			}
		})
	}
}

// TestTransportUsageClosedEarly: a caller that closes the body before
// its end has Usage called with what it read; a count above the
// estimate is charged (what was read is a lower bound of what the
// provider counted), one below it or none leaves the estimate.
func TestTransportUsageClosedEarly(t *testing.T) {
	answer := func(used int) string { return openAI(10, used-10) + strings.Repeat(" ", 4096) + "\n" }
	for _, c := range []struct {
		name     string
		used     int
		read     int // bytes read before Close: -1 up to the usage object's end
		wantRoom int64
	}{
		{"usage read, above the estimate", 700, -1, budget - 700},
		{"usage read, below the estimate", 40, -1, budget - estimate},
		{"usage not read", 700, 20, budget - estimate},
		{"nothing read", 700, 0, budget - estimate},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := answer(c.used)
			g := newTokenRig(t, writeString(body))
			n := c.read
			if n < 0 {
				n = strings.Index(body, "}}}") + 3
			}
			resp := g.call(t)
			buf := make([]byte, n)
			_, err := io.ReadFull(resp.Body, buf)
			must(t, err)
			must(t, resp.Body.Close())
			g.wantRoom(t, c.wantRoom)
			if calls := g.usageCalls(); len(calls) != 1 || string(calls[0]) != body[:n] {
				t.Errorf("Usage was given %q; want once what was read, %q", calls, body[:n])
			}
		})
	}
}

// TestTransportUsageStream: a streamed answer (server-sent events, sent
// one by one) is settled to the usage of its last event: OpenAI's
// total, or Anthropic's output count with the input count of its first
// event.
func TestTransportUsageStream(t *testing.T) {
	openAIStream := []string{
		`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":290,"total_tokens":320}}`,
		`data: [DONE]`,
	}
	anthropicStream := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300}}",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}",
	}
	for _, c := range []struct {
		name     string
		events   []string
		wantRoom int64
	}{
		{"OpenAI", openAIStream, budget - 320},
		{"Anthropic", anthropicStream, budget - 325},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newTokenRig(t, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range c.events {
					io.WriteString(w, e+"\n\n")
					w.(http.Flusher).Flush()
				}
			})
			resp := g.call(t)
			readAll(t, resp)
			g.wantRoom(t, c.wantRoom)
		})
	}
}

// TestTransportUsageTail: of a body longer than 16 KiB, read in pieces
// of any size, Usage is given its last 16 KiB in order, and the usage
// there settles the call; a usage before them is not seen (the
// estimate stands).
func TestTransportUsageTail(t *testing.T) {
	const tail = 16 << 10
	filler := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%d,", i) // no two windows alike
		}
		return b.String()[:n]
	}
	for _, c := range []struct {
		name     string
		body     string
		piece    int
		wantRoom int64
	}{
		{"usage at the end", `{"filler":"` + filler(100_000) + `",` + openAI(10, 690)[1:], 4093, budget - 700},
		{"usage at the end, read a byte at a time", `{"filler":"` + filler(40_000) + `",` + openAI(10, 690)[1:], 1, budget - 700},
		{"usage at the start", openAI(10, 690) + filler(tail), 4093, budget - estimate},
		{"exactly the tail", filler(tail-len(openAI(10, 690))) + openAI(10, 690), 1000, budget - 700},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newTokenRig(t, writeString(c.body))
			resp := g.call(t)
			var got bytes.Buffer
			buf := make([]byte, c.piece)
			for {
				n, err := resp.Body.Read(buf)
				got.Write(buf[:n])
				if err == io.EOF {
					break
				}
				must(t, err)
			}
			must(t, resp.Body.Close())
			if got.String() != c.body {
				t.Fatalf("the caller read %d bytes that differ from the answer's %d", got.Len(), len(c.body))
			}
			g.wantRoom(t, c.wantRoom)
			calls := g.usageCalls()
			if len(calls) != 1 {
				t.Fatalf("Usage called %d times; want once", len(calls))
			}
			if want := c.body[len(c.body)-tail:]; string(calls[0]) != want {
				t.Errorf("Usage was given %d bytes, not the body's last %d in order", len(calls[0]), tail)
			}
		})
	}
}

// TestTransportUsageMalformed: an answer whose usage cannot be read
// leaves the estimate charged.
func TestTransportUsageMalformed(t *testing.T) {
	for _, body := range []string{
		`{"usage":{"total_tokens":-5}}`,
		`{"usage":{"total_tokens":1e3}}`,
		`{"usage":{"total_tokens":5.0}}`,
		`{"usage":{"total_tokens":99999999999999999999}}`,
		`{"usage":{"total_tokens":"50"}}`,
		`{"usage":{"prompt_tokens":5}}`,
		`{"usage":{"total_tokens":5`,
		`{"usage":null}`,
		`{"error":{"type":"invalid_request_error","message":"bad"}}`,
		``,
	} {
		t.Run(body, func(t *testing.T) {
			g := newTokenRig(t, writeString(body))
			readAll(t, g.call(t))
			g.wantRoom(t, budget-estimate)
			if n := len(g.usageCalls()); n != 1 {
				t.Errorf("Usage called %d times; want once", n)
			}
		})
	}
}

// TestTransportUsageNeedsTokensLane: a Usage without a TokensLane is a
// programming error, found when the transport is made.
func TestTransportUsageNeedsTokensLane(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(1))))
	set, err := q.Lanes("provider")
	must(t, err)
	defer func() {
		if recover() == nil {
			t.Error("NewTransport with a Usage and no TokensLane did not panic")
		}
	}()
	lanehttp.NewTransport(lanehttp.TransportConfig[string]{Queue: q, Lanes: set, Usage: lanehttp.UsageJSON})
}

// TestTransportTokensLaneNotRate: a TokensLane that names a global or
// keyed lane is a programming error, found when the transport is made:
// the estimate would be held of that lane's concurrency and Usage's
// settle refused, while the provider's tokens lane was charged 1 a call.
func TestTransportTokensLaneNotRate(t *testing.T) {
	q := lanequeue.Default[string](4) // "session" (keyed) and "global"
	defer q.Close()
	must(t, q.Add("tpm", lanequeue.NewTokenLane[string](budget)))
	set, err := q.Lanes("session", "global", "tpm")
	must(t, err)
	for _, lane := range []string{"global", "session"} {
		for _, usage := range []func(*http.Response, []byte) (int64, bool){nil, lanehttp.UsageJSON} {
			func() {
				defer func() {
					v := recover()
					if s, _ := v.(string); !strings.HasPrefix(s, "lanehttp: ") {
						t.Errorf("TokensLane %q (Usage set: %v): NewTransport panicked with %v; want a lanehttp: message", lane, usage != nil, v)
					}
				}()
				lanehttp.NewTransport(lanehttp.TransportConfig[string]{
					Queue: q, Lanes: set,
					TokensLane: lane, Tokens: func(*http.Request) int64 { return estimate },
					Usage: usage,
				})
			}()
		}
	}
}

// TestTransportUsageNeedsALaneThatSettles: with Usage, a TokensLane that
// cannot settle (a NewRateLane lane: a request rate, not tokens) is refused
// when the transport is made, not found at every body's Close; without
// Usage it is a lane like any rate lane, charged the estimate.
func TestTransportUsageNeedsALaneThatSettles(t *testing.T) {
	q := lanequeue.Default[string](4)
	defer q.Close()
	must(t, q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1000, 1000))))
	set, err := q.Lanes("session", "global", "rpm")
	must(t, err)
	cfg := lanehttp.TransportConfig[string]{
		Queue: q, Lanes: set,
		TokensLane: "rpm", Tokens: func(*http.Request) int64 { return estimate },
	}
	lanehttp.NewTransport(cfg) // no Usage: taken
	cfg.Usage = lanehttp.UsageJSON
	func() {
		defer func() {
			v := recover()
			if s, _ := v.(string); !strings.HasPrefix(s, "lanehttp: ") || !strings.Contains(s, "settle") {
				t.Errorf("Usage with a NewRateLane TokensLane: NewTransport panicked with %v; want a lanehttp: message saying it cannot settle", v)
			}
		}()
		lanehttp.NewTransport(cfg)
	}()
}

// TestTransportSettleErrorIsClosesError: a settle the lane refuses (a
// Usage's count above semaphore.MaxCapacity), or a negative count from
// Usage, is not dropped: the body's Close returns it, at EOF or before,
// and the estimate stays charged.
func TestTransportSettleErrorIsClosesError(t *testing.T) {
	for _, tokens := range []int64{semaphore.MaxCapacity + 1, -5} {
		for _, atEOF := range []bool{false, true} {
			t.Run(fmt.Sprintf("tokens %d at EOF %v", tokens, atEOF), func(t *testing.T) {
				bad := func(*http.Response, []byte) (int64, bool) { return tokens, true }
				g := newTokenRig(t, writeString(openAI(10, 20)), bad)
				resp := g.call(t)
				if atEOF {
					if _, err := io.ReadAll(resp.Body); err != nil {
						t.Fatalf("reading the answer: %v; want its bytes, whatever its usage", err)
					}
				}
				if err := resp.Body.Close(); !errors.Is(err, semaphore.ErrInvalidWeight) {
					t.Errorf("Close returned %v; want the refused settle's error, matching semaphore.ErrInvalidWeight", err)
				}
				g.wantRoom(t, budget-estimate)
			})
		}
	}
}

// TestTransportUsagePanics: a Usage that panics at Close or at EOF
// panics the caller's Close or Read, and the call's lanes are released
// all the same, with the estimate charged.
func TestTransportUsagePanics(t *testing.T) {
	boom := func(*http.Response, []byte) (int64, bool) { panic(errBoom) }
	for _, atEOF := range []bool{false, true} {
		t.Run(fmt.Sprintf("at EOF %v", atEOF), func(t *testing.T) {
			g := newTokenRig(t, writeString(openAI(10, 690)), boom)
			resp := g.call(t)
			func() {
				defer func() {
					if v := recover(); v != errBoom {
						t.Errorf("the caller's call panicked with %v; want Usage's panic", v)
					}
				}()
				if atEOF {
					io.ReadAll(resp.Body)
				}
				resp.Body.Close()
			}()
			if atEOF { // the caller closes after the failed read
				closed := testkit.Go(resp.Body.Close)
				must(t, testkit.Recv(t, closed, "Close after Usage panicked in Read"))
			}
			g.wantRoom(t, budget-estimate)
		})
	}
}

// TestTransportUsageCloseDuringRead: a caller that closes the body while
// another goroutine reads it (or is about to) has Usage called once, with
// what was read before, and the call's lanes released; the read ends
// with an error.
func TestTransportUsageCloseDuringRead(t *testing.T) {
	sent := make(chan struct{})
	hold := make(chan struct{})
	defer close(hold)
	first := "data: {\"usage\":{\"input_tokens\":700,\"output_tokens\":1}}\n\n"
	g := newTokenRig(t, func(w http.ResponseWriter) {
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		close(sent)
		<-hold // the rest never comes
	})
	resp := g.call(t)
	testkit.Recv(t, sent, "the stream's first event")
	buf := make([]byte, len(first))
	_, err := io.ReadFull(resp.Body, buf)
	must(t, err)
	reading := testkit.Go(func() error {
		_, err := resp.Body.Read(make([]byte, 10))
		return err
	})
	must(t, resp.Body.Close())
	if err := testkit.Recv(t, reading, "the Read waiting when the body was closed"); err == nil {
		t.Error("the Read waiting when the body was closed returned no error")
	}
	g.wantRoom(t, budget-701)
	if calls := g.usageCalls(); len(calls) != 1 || string(calls[0]) != first {
		t.Errorf("Usage was given %q; want once what was read, %q", calls, first)
	}
}

// bodyBase is a provider that answers every request with body, read
// from memory: a Read returns as much as its buffer holds.
type bodyBase string

func (b bodyBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(b))), Request: r}, nil
}

// TestTransportUsageTailOneRead: of a body longer than 16 KiB read in
// one Read, Usage is given its last 16 KiB.
func TestTransportUsageTailOneRead(t *testing.T) {
	const tail = 16 << 10
	body := strings.Repeat("x", 3*tail) + openAI(10, 690)
	q := lanequeue.New[string]()
	defer q.Close()
	q.SetClock(clock.NewFake(received))
	must(t, q.Add("tpm", lanequeue.NewTokenLane[string](budget)))
	set, err := q.Lanes("tpm")
	must(t, err)
	var got []byte
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base:  bodyBase(body),
		Queue: q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return estimate },
		Usage: func(resp *http.Response, b []byte) (int64, bool) {
			got = bytes.Clone(b)
			return lanehttp.UsageJSON(resp, b)
		},
	})
	req, err := http.NewRequest(http.MethodGet, "http://provider.invalid/", nil)
	must(t, err)
	resp, err := tr.RoundTrip(req)
	must(t, err)
	buf := make([]byte, len(body)+1)
	if n, err := resp.Body.Read(buf); n != len(body) || err != nil {
		t.Fatalf("Read = %d, %v; want the whole body, %d bytes, in one Read", n, err, len(body))
	}
	if n, err := resp.Body.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the body = %d, %v; want EOF", n, err)
	}
	must(t, resp.Body.Close())
	if want := body[len(body)-tail:]; string(got) != want {
		t.Errorf("Usage was given %d bytes, not the body's last %d", len(got), tail)
	}
	tk, ok := q.TryAcquireAll("", set, lanequeue.LaneWeight("tpm", budget-700+1))
	if ok {
		tk.Release()
		t.Errorf("a call of %d tokens fits; want the call settled to 700 of %d", budget-700+1, budget)
	}
}

// TestTransportRefusedAttemptUsesNoTokens: an attempt the provider refused
// for overload used none of its estimate: the token lane gets it back,
// whether the attempt is retried or answers the caller.
func TestTransportRefusedAttemptUsesNoTokens(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	q.SetClock(clock.NewFake(received))
	must(t, q.Add("tpm", lanequeue.NewTokenLane[string](budget)))
	set, err := q.Lanes("tpm")
	must(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base:  srv.Client().Transport,
		Queue: q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return estimate },
		Usage:       lanehttp.UsageJSON,
		MaxAttempts: 1,
	})}
	t.Cleanup(client.CloseIdleConnections)
	for range 3 {
		resp, err := client.Get(srv.URL)
		must(t, err)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d; want the provider's 429", resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	tk, ok := q.TryAcquireAll("", set, lanequeue.LaneWeight("tpm", budget))
	if !ok {
		t.Fatalf("the whole budget does not fit after three refused calls: their estimates stayed charged")
	}
	tk.Release()
}

// TestTransportFillsTheTokenLaneOnlyForTokens: a refusal with a retry time
// pauses the transport's lanes, and the token lane is counted full
// (Queue.Exhaust) only when the provider said its tokens ran out: after a
// refusal of the requests limit, once the pause is over, the whole budget
// is there again (the refused call was settled to 0); after a refusal of
// the tokens, none of it is until the window moves on.
func TestTransportFillsTheTokenLaneOnlyForTokens(t *testing.T) {
	for _, c := range []struct {
		name     string
		spent    string // the remaining header that reads 0
		wantRoom int64
	}{
		{"requests spent", "X-Ratelimit-Remaining-Requests", budget},
		{"tokens spent", "X-Ratelimit-Remaining-Tokens", 0},
		{"anthropic output tokens spent", "Anthropic-Ratelimit-Output-Tokens-Remaining", 0},
		{"tokens spent, no retry time", "X-Ratelimit-Remaining-Tokens", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newTokenRig(t, func(w http.ResponseWriter) {
				w.Header().Set(c.spent, "0")
				if !strings.Contains(c.name, "no retry time") {
					w.Header().Set("Retry-After", "5")
				}
				w.Header().Set("X-Should-Retry", "false") // answered at once: the test's clock does not move
				w.WriteHeader(http.StatusTooManyRequests)
			})
			resp := g.call(t)
			readAll(t, resp)
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d; want the provider's 429", resp.StatusCode)
			}
			g.clk.Advance(5 * time.Second) // the pause is over
			g.wantRoom(t, c.wantRoom)
		})
	}
}
