package lanehttp_test

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkTransport is a round trip to a provider on loopback: through
// the bare client, through a Transport over a concurrency lane, a
// requests lane and a tokens lane that never make it wait, and through
// one whose tokens lane is a token lane settled to each answer's usage.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"usage":{"input_tokens":40,"output_tokens":60}}`)
	}))
	defer srv.Close()
	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(64))); err != nil {
		b.Fatal(err)
	}
	if err := q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e9, 1e9))); err != nil {
		b.Fatal(err)
	}
	if err := q.Add("tpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e12, math.MaxInt32))); err != nil {
		b.Fatal(err)
	}
	if err := q.Add("tokens", lanequeue.NewTokenLane[string](semaphore.MaxCapacity)); err != nil {
		b.Fatal(err)
	}
	set, err := q.Lanes("provider", "rpm", "tpm")
	if err != nil {
		b.Fatal(err)
	}
	settled, err := q.Lanes("provider", "rpm", "tokens")
	if err != nil {
		b.Fatal(err)
	}
	bare := srv.Client()
	defer bare.CloseIdleConnections()
	lanes := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: bare.Transport, Queue: q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return 100 },
	})}
	usage := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: bare.Transport, Queue: q, Lanes: settled,
		TokensLane: "tokens", Tokens: func(*http.Request) int64 { return 100 },
		Usage: lanehttp.UsageJSON,
	})}
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"bare", bare}, {"lanes", lanes}, {"lanes+usage", usage}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				resp, err := c.client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkAblationCoarseStart is the round trip of BenchmarkTransport
// through one concurrency lane, with the coarse clock (the tickets'
// stamps) starting its timer only when read often (tick=counted, as
// built) or on its first read (tick=always, as before): a round trip
// reads it a few times in tens of microseconds, too seldom for the
// timer's ticks to pay for themselves (see internal/coarse).
func BenchmarkAblationCoarseStart(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	bare := srv.Client()
	defer bare.CloseIdleConnections()
	for _, always := range []bool{false, true} {
		name := "tick=counted"
		if always {
			name = "tick=always"
		}
		b.Run(name, func(b *testing.B) {
			coarse.AlwaysTick = always
			defer func() { coarse.AlwaysTick = false }()
			q := lanequeue.New[string]()
			defer q.Close()
			if err := q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(64))); err != nil {
				b.Fatal(err)
			}
			set, err := q.Lanes("provider")
			if err != nil {
				b.Fatal(err)
			}
			c := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
				Base: bare.Transport, Queue: q, Lanes: set,
			})}
			b.ReportAllocs()
			for range b.N {
				resp, err := c.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// instantBase answers every request at once with an empty 200.
type instantBase struct{}

func (instantBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// BenchmarkTransportOwn is the Transport's own work in a round trip of
// BenchmarkTransport's lanes row: the same lanes, over a base that
// answers at once, the response's body closed at once. On loopback each
// nanosecond of it costs the round trip more than a nanosecond (see
// docs/benchmarks-policies.md, "A round trip through the transport").
func BenchmarkTransportOwn(b *testing.B) {
	benchOwn(b)
}

// BenchmarkAblationAttemptNow is BenchmarkTransportOwn with the Attempt's
// Now left zero for DefaultClassifier, which reads the clock only for a
// Retry-After date (now=lazy, as built), or read for every attempt
// (now=always, as before).
func BenchmarkAblationAttemptNow(b *testing.B) {
	for _, always := range []bool{false, true} {
		name := "now=lazy"
		if always {
			name = "now=always"
		}
		b.Run(name, func(b *testing.B) {
			lanehttp.SetAlwaysStamp(always)
			defer lanehttp.SetAlwaysStamp(false)
			benchOwn(b)
		})
	}
}

// benchOwn runs BenchmarkTransportOwn.
func benchOwn(b *testing.B) {
	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(64))); err != nil {
		b.Fatal(err)
	}
	if err := q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e9, 1e9))); err != nil {
		b.Fatal(err)
	}
	if err := q.Add("tpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e12, math.MaxInt32))); err != nil {
		b.Fatal(err)
	}
	set, err := q.Lanes("provider", "rpm", "tpm")
	if err != nil {
		b.Fatal(err)
	}
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: instantBase{}, Queue: q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return 100 },
	})
	req, err := http.NewRequest(http.MethodGet, "http://provider.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}
