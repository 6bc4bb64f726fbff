package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/promlanes"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// message is a webhook's JSON body, as a Slack-like chat platform posts it.
type message struct {
	Tenant string `json:"tenant"`
	Thread string `json:"thread"`
	N      int64  `json:"n"`    // the message's number in its thread, from 1
	Kind   string `json:"kind"` // "user" (the default) or "cron"
	Text   string `json:"text"`
}

// maxN is the largest message number: a fleet's thread lane orders by it
// in Redis, which counts exactly up to 2^53.
const maxN = 1 << 53

// check refuses a message the gateway cannot key or order: the answer is
// 400, the sender's to mend.
func (m message) check() error {
	switch {
	case m.Thread == "" || m.Tenant == "" || m.N < 1:
		return errors.New("a message needs a tenant, a thread and a number from 1")
	case m.N > maxN:
		return fmt.Errorf("a message number is at most %d", int64(maxN))
	case strings.Contains(m.Tenant, "/"):
		// the key is tenant/thread: tenant "a/b" with thread "c" would
		// share the key of tenant "a" with thread "b/c"
		return errors.New("a tenant has no slash")
	case m.Kind != "" && m.Kind != "user" && m.Kind != "cron":
		return fmt.Errorf("a message's kind is user (the default) or cron, not %q", m.Kind)
	}
	return nil
}

// config is what a gateway is made of.
type config struct {
	Agents       int64         // agent runs at once: the gateway's, or with Redis the fleet's
	ModelCeiling int64         // the most model calls in flight the controller may allow
	Hold         time.Duration // how long a message waits for its thread's predecessor
	ModelURL     string        // the model API's endpoint
	ModelBase    http.RoundTripper
	Backoff      time.Duration // the first retry's backoff after a 429 without a hint
	Handle       handleFunc    // what the agent does with a message (nil: call the model once)
	// Redis, if set, makes the three lanes a fleet's, shared by
	// every replica on that Redis (see newLanes), made with RedisOptions.
	Redis        redis.UniversalClient
	RedisOptions []redislane.Option
}

// handleFunc runs the agent for one message, holding its thread and its
// agent slot; ask calls the model.
type handleFunc func(ctx context.Context, m message, ask func(ctx context.Context, prompt string) (string, error)) (string, error)

// gateway is the recipe: webhooks in, through the lanes, model calls out,
// and the lanes' metrics on /metrics for Prometheus.
type gateway struct {
	lanes   *lanes
	handler http.Handler
	model   *http.Client
	url     string
}

// newGateway builds the gateway of cfg.
func newGateway(cfg config) (*gateway, error) {
	l, err := newLanes(cfg.Agents, cfg.ModelCeiling, cfg.Hold, cfg.Redis, cfg.RedisOptions...)
	if err != nil {
		return nil, err
	}
	g := &gateway{lanes: l, url: cfg.ModelURL}
	g.model = &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: cfg.ModelBase, Queue: l.q, Lanes: l.model, Backoff: cfg.Backoff,
	})}
	handle := cfg.Handle
	if handle == nil {
		handle = func(ctx context.Context, m message, ask func(context.Context, string) (string, error)) (string, error) {
			return ask(ctx, m.Text)
		}
	}
	dec := new(lanehttp.Decoder[message]) // JSON, read once, at most MaxBodyBytes
	webhooks := lanehttp.Handler(lanehttp.Config[string]{
		Queue: l.q, Lanes: l.inbound, Decode: dec, MaxBodyBytes: 64 << 10,
		Key: func(r *http.Request) (string, error) {
			m, _ := dec.From(r.Context())
			if err := m.check(); err != nil {
				return "", err
			}
			return m.Tenant + "/" + m.Thread, nil
		},
		Options: func(r *http.Request) ([]semaphore.AcquireOption, error) {
			m, _ := dec.From(r.Context())
			return []semaphore.AcquireOption{semaphore.Sequence(m.N), agentsTurn(m.Tenant, m.Kind)}, nil
		},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := dec.From(r.Context())
		answer, err := handle(r.Context(), m, g.ask)
		if err != nil {
			http.Error(w, "the model did not answer", http.StatusBadGateway)
			return
		}
		io.WriteString(w, answer)
	}))
	// The waits on the fair agents lane by group (top 10 groups and
	// "other"), beside the lanes' own metrics; GroupHooks chains any hooks
	// given to it (none here).
	groups := exporters.NewGroupWaits()
	l.q.SetHooks(exporters.GroupHooks(groups, lanequeue.Hooks[string]{}))
	reg := prometheus.NewRegistry()
	if err := reg.Register(promlanes.New(l.q, promlanes.WithGroupWaits(groups))); err != nil {
		l.q.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", webhooks)
	g.handler = mux
	return g, nil
}

// ask calls the model API with prompt. ctx is the webhook's: it carries the
// webhook's ticket, so the call is served during a drain.
func (g *gateway) ask(ctx context.Context, prompt string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader([]byte(prompt)))
	if err != nil {
		return "", err
	}
	resp, err := g.model.Do(req) // the model lane, its 429s retried after their Retry-After
	if err != nil {
		return "", err
	}
	defer resp.Body.Close() // gives the model lane back
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New("model: " + resp.Status)
	}
	return string(body), err
}

// shutdown drains the lanes, then stops srv: the webhooks admitted finish,
// their model calls included; new ones are answered 503 meanwhile.
func (g *gateway) shutdown(ctx context.Context, srv *http.Server) error {
	return errors.Join(g.lanes.drain(ctx), srv.Shutdown(ctx))
}
