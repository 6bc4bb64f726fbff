package lanehttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// errNoColon is the error of decodeFixture's decoder for a body without
// ':'.
var errNoColon = errors.New("no ':' in the body")

// decodeFixture is a middleware over a keyed lane "thread" and a global
// lane "model" whose Decode reads a body "key:rest" into its key, counting
// its calls, and whose handler records the decoded value and the body it
// reads.
type decodeFixture struct {
	q       *lanequeue.Queue[string]
	dec     *lanehttp.Decoder[string]
	h       http.Handler
	decodes atomic.Int64
	calls   atomic.Int64
	// set by the handler, read after ServeHTTP returns
	gotKey   string
	gotValue string
	gotOK    bool
	gotBody  []byte
	// set by Reject
	rejected error
}

// newDecodeFixture makes a decodeFixture; edit, if not nil, changes its
// Config before the middleware is made.
func newDecodeFixture(t *testing.T, edit func(*lanehttp.Config[string])) *decodeFixture {
	t.Helper()
	f := &decodeFixture{q: lanequeue.New[string]()}
	t.Cleanup(f.q.Close)
	must(t, f.q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithSequenceOrder()))))
	must(t, f.q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(4, semaphore.WithFairShare(func(string) int { return 1 })))))
	set, err := f.q.Lanes("thread", "model")
	must(t, err)
	f.dec = lanehttp.NewDecoder(func(r *http.Request, body []byte) (string, error) {
		f.decodes.Add(1)
		k, _, ok := bytes.Cut(body, []byte(":"))
		if !ok {
			return "", errNoColon
		}
		return string(k), nil
	})
	cfg := lanehttp.Config[string]{
		Queue:  f.q,
		Lanes:  set,
		Decode: f.dec,
		Key: func(r *http.Request) (string, error) {
			k, ok := f.dec.From(r.Context())
			if !ok {
				t.Error("Key: no decoded value in the request's context")
			}
			return k, nil
		},
		Reject: func(w http.ResponseWriter, r *http.Request, status int, err error) {
			f.rejected = err
			http.Error(w, http.StatusText(status), status)
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	f.h = lanehttp.Handler(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		f.gotValue, f.gotOK = f.dec.From(r.Context())
		if _, ok := lanequeue.TicketFrom[string](r.Context()); ok {
			for _, h := range f.q.Holders() { // one request at a time
				f.gotKey = h.Key
			}
		}
		f.gotBody, _ = io.ReadAll(r.Body)
	}))
	return f
}

// bodyRequest is a POST of body; with known false, its Content-Length is
// unknown (-1), as a chunked request's is.
func bodyRequest(t *testing.T, body string, known bool) *http.Request {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if !known {
		rd = io.NopCloser(rd) // not a type whose length NewRequest reads
	}
	r := httptest.NewRequest(http.MethodPost, "/hook", rd)
	if want := map[bool]int64{true: int64(len(body)), false: -1}[known]; r.ContentLength != want {
		t.Fatalf("test setup: ContentLength %d; want %d", r.ContentLength, want)
	}
	return r
}

// countingBody counts the bytes read from a request's body.
type countingBody struct {
	io.ReadCloser
	n int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// untouched fails t unless no lane of q was ever asked for anything: no
// counter moved, nothing held or waiting, no key made.
func untouched(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Counters != (semaphore.Counters{}) || st.Held != 0 || st.Waiters != 0 || st.Keys != 0 {
			t.Errorf("lane %q: counters %+v, held %d, waiters %d, keys %d; want a lane never asked", st.Name, st.Counters, st.Held, st.Waiters, st.Keys)
		}
	}
}

// TestDecodeOverBound: a body one byte over Config.MaxBodyBytes (16, and
// DefaultMaxBodyBytes when it is 0) is answered 413 with the status text;
// Reject is given an error wrapping ErrBodyTooLarge; neither the decoder
// nor the handler is called, and no lane was asked for anything. Whether
// the request declares its length (then no byte of the body is read) or
// not (chunked).
func TestDecodeOverBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int64
		bound int
	}{
		{"MaxBodyBytes", 16, 16},
		{"default", 0, lanehttp.DefaultMaxBodyBytes},
	} {
		for _, known := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/Content-Length", false: "/chunked"}[known], func(t *testing.T) {
				t.Parallel()
				f := newDecodeFixture(t, func(c *lanehttp.Config[string]) { c.MaxBodyBytes = tc.max })
				body := "k:" + strings.Repeat("x", tc.bound+1-2)
				r := bodyRequest(t, body, known)
				read := &countingBody{ReadCloser: r.Body}
				r.Body = read
				w := serve(f.h, r)
				if known && read.n != 0 {
					t.Errorf("%d bytes of the body read; want none: its Content-Length is over the bound", read.n)
				}
				if w.Code != http.StatusRequestEntityTooLarge || w.Body.String() != http.StatusText(http.StatusRequestEntityTooLarge)+"\n" {
					t.Errorf("answer %d %q; want 413 with the status text", w.Code, w.Body.String())
				}
				if !errors.Is(f.rejected, lanehttp.ErrBodyTooLarge) {
					t.Errorf("Reject given %v; want an error wrapping ErrBodyTooLarge", f.rejected)
				}
				if n, c := f.decodes.Load(), f.calls.Load(); n != 0 || c != 0 {
					t.Errorf("decoder called %d times, handler %d; want neither", n, c)
				}
				untouched(t, f.q)
			})
		}
	}
}

// TestDecodeAtBound: a body of exactly Config.MaxBodyBytes bytes (16, and
// DefaultMaxBodyBytes when it is 0) is served, and the handler reads all
// of it.
func TestDecodeAtBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int64
		bound int
	}{
		{"MaxBodyBytes", 16, 16},
		{"default", 0, lanehttp.DefaultMaxBodyBytes},
	} {
		for _, known := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/Content-Length", false: "/chunked"}[known], func(t *testing.T) {
				t.Parallel()
				f := newDecodeFixture(t, func(c *lanehttp.Config[string]) { c.MaxBodyBytes = tc.max })
				body := "k:" + strings.Repeat("x", tc.bound-2)
				w := serve(f.h, bodyRequest(t, body, known))
				if w.Code != http.StatusOK {
					t.Fatalf("answer %d %q (Reject given %v); want 200", w.Code, w.Body.String(), f.rejected)
				}
				if string(f.gotBody) != body {
					t.Errorf("the handler read %d bytes; want the body's %d", len(f.gotBody), len(body))
				}
				nothingHeld(t, f.q)
			})
		}
	}
}

// TestDecodeMalformed: a body the decoder refuses, and one that is not
// JSON for the zero Decoder, are answered 400 with the status text (not
// the error's); Reject is given the decoder's error; the handler is not
// called, and no lane was asked for anything.
func TestDecodeMalformed(t *testing.T) {
	t.Parallel()
	t.Run("NewDecoder", func(t *testing.T) {
		t.Parallel()
		f := newDecodeFixture(t, nil)
		w := serve(f.h, bodyRequest(t, "no colon here", true))
		if w.Code != http.StatusBadRequest || w.Body.String() != "Bad Request\n" {
			t.Errorf("answer %d %q; want 400 \"Bad Request\\n\"", w.Code, w.Body.String())
		}
		if !errors.Is(f.rejected, errNoColon) {
			t.Errorf("Reject given %v; want the decoder's error", f.rejected)
		}
		if n, c := f.decodes.Load(), f.calls.Load(); n != 1 || c != 0 {
			t.Errorf("decoder called %d times, handler %d; want 1 and 0", n, c)
		}
		untouched(t, f.q)
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		type msg struct {
			Thread string `json:"thread"`
		}
		dec := new(lanehttp.Decoder[msg])
		f := newDecodeFixture(t, func(c *lanehttp.Config[string]) {
			c.Decode = dec
			c.Key = func(r *http.Request) (string, error) {
				m, _ := dec.From(r.Context())
				return m.Thread, nil
			}
		})
		for _, body := range []string{`{"thread": "t1"`, `["t1"]`, ``} {
			f.rejected = nil
			w := serve(f.h, bodyRequest(t, body, true))
			if w.Code != http.StatusBadRequest || w.Body.String() != "Bad Request\n" || f.rejected == nil {
				t.Errorf("body %q: answer %d %q, Reject given %v; want 400 \"Bad Request\\n\" and the JSON error", body, w.Code, w.Body.String(), f.rejected)
			}
		}
		if c := f.calls.Load(); c != 0 {
			t.Errorf("handler called %d times; want 0", c)
		}
		untouched(t, f.q)
		// and a body that is JSON is served
		if w := serve(f.h, bodyRequest(t, `{"thread": "t1"}`, true)); w.Code != http.StatusOK || f.gotKey != "t1" {
			t.Errorf("JSON body: answer %d, key %q; want 200 and key t1", w.Code, f.gotKey)
		}
	})
}

// TestDecodeValueAndBody: Key and Options are given the decoded value, and
// the handler both the value and the whole body, though Key read the body
// to its end; the decoder runs once per request; another Decoder of the
// same type finds no value.
func TestDecodeValueAndBody(t *testing.T) {
	t.Parallel()
	other := lanehttp.NewDecoder(func(*http.Request, []byte) (string, error) { return "other", nil })
	var optionsSaw string
	var otherOK bool
	var f *decodeFixture
	f = newDecodeFixture(t, func(c *lanehttp.Config[string]) {
		key := c.Key
		c.Key = func(r *http.Request) (string, error) {
			if _, err := io.ReadAll(r.Body); err != nil { // Key may read the body
				t.Errorf("Key: reading the body: %v", err)
			}
			_, otherOK = other.From(r.Context())
			return key(r)
		}
		c.Options = func(r *http.Request) ([]semaphore.AcquireOption, error) {
			optionsSaw, _ = f.dec.From(r.Context())
			return []semaphore.AcquireOption{semaphore.Group(optionsSaw)}, nil
		}
	})
	for i, body := range []string{"thread-1:hello", "thread-2:a longer message"} {
		w := serve(f.h, bodyRequest(t, body, i == 0))
		if w.Code != http.StatusOK {
			t.Fatalf("%q: answer %d (Reject given %v); want 200", body, w.Code, f.rejected)
		}
		wantKey, _, _ := strings.Cut(body, ":")
		if f.gotKey != wantKey || optionsSaw != wantKey || !f.gotOK || f.gotValue != wantKey {
			t.Errorf("%q: ticket's key %q, Options saw %q, handler's value %q (found %v); want %q for each", body, f.gotKey, optionsSaw, f.gotValue, f.gotOK, wantKey)
		}
		if string(f.gotBody) != body {
			t.Errorf("%q: the handler read %q; want the whole body", body, f.gotBody)
		}
		if otherOK {
			t.Errorf("%q: another Decoder's From found a value; want none", body)
		}
		if n := f.decodes.Load(); n != int64(i+1) {
			t.Errorf("after %d requests the decoder ran %d times; want once per request", i+1, n)
		}
	}
	nothingHeld(t, f.q)
}

// TestDecodePanics: a decoder that panics does so before any lane is
// asked: the panic goes on, the handler is not called, nothing is held.
func TestDecodePanics(t *testing.T) {
	t.Parallel()
	dec := lanehttp.NewDecoder(func(*http.Request, []byte) (string, error) { panic("decoder bug") })
	f := newDecodeFixture(t, func(c *lanehttp.Config[string]) {
		c.Decode = dec
		c.Key = func(*http.Request) (string, error) { return "k", nil }
	})
	got := func() (v any) {
		defer func() { v = recover() }()
		serve(f.h, bodyRequest(t, "k:v", true))
		return nil
	}()
	if got != "decoder bug" {
		t.Errorf("recovered %v; want the decoder's panic", got)
	}
	if c := f.calls.Load(); c != 0 {
		t.Errorf("handler called %d times; want 0", c)
	}
	untouched(t, f.q)
}

// TestDecodeNotSet: without Decode, the body is not read and not bounded:
// the handler reads all of a body over MaxBodyBytes.
func TestDecodeNotSet(t *testing.T) {
	t.Parallel()
	f := newDecodeFixture(t, func(c *lanehttp.Config[string]) {
		c.Decode = nil
		c.MaxBodyBytes = 4
		c.Key = func(*http.Request) (string, error) { return "k", nil }
	})
	body := "k:longer than four bytes"
	if w := serve(f.h, bodyRequest(t, body, false)); w.Code != http.StatusOK || string(f.gotBody) != body {
		t.Errorf("answer %d, handler read %q; want 200 and %q", w.Code, f.gotBody, body)
	}
	if n := f.decodes.Load(); n != 0 {
		t.Errorf("decoder called %d times without Config.Decode", n)
	}
}

// TestDecodeSetupPanics: a negative MaxBodyBytes, NewDecoder(nil) and a
// nil *Decoder as Decode are programming errors found at setup.
func TestDecodeSetupPanics(t *testing.T) {
	t.Parallel()
	f := newDecodeFixture(t, nil)
	set, err := f.q.Lanes("thread")
	must(t, err)
	for name, fn := range map[string]func(){
		"MaxBodyBytes -1": func() {
			lanehttp.Middleware(lanehttp.Config[string]{Queue: f.q, Lanes: set, Key: func(*http.Request) (string, error) { return "", nil }, MaxBodyBytes: -1})
		},
		"NewDecoder(nil)": func() { lanehttp.NewDecoder[string](nil) },
		"Decode nil *Decoder": func() {
			var dec *lanehttp.Decoder[string]
			lanehttp.Middleware(lanehttp.Config[string]{Queue: f.q, Lanes: set, Key: func(*http.Request) (string, error) { return "", nil }, Decode: dec})
		},
	} {
		func() {
			defer func() {
				if v, _ := recover().(string); !strings.HasPrefix(v, "lanehttp: ") {
					t.Errorf("%s: recovered %q; want a panic prefixed lanehttp:", name, v)
				}
			}()
			fn()
		}()
	}
}

// TestDecodeLoopback413: through a real server, a chunked body over the
// bound is answered 413 and the server closes the connection (it does not
// read the rest of an unbounded body to reuse it).
func TestDecodeLoopback413(t *testing.T) {
	t.Parallel()
	f := newDecodeFixture(t, func(c *lanehttp.Config[string]) { c.MaxBodyBytes = 64 })
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		size   int
		status int
	}{{64, http.StatusOK}, {65, http.StatusRequestEntityTooLarge}} {
		body := "k:" + strings.Repeat("x", tc.size-2)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, io.NopCloser(strings.NewReader(body)))
		must(t, err)
		resp, err := client.Do(req) // chunked: its length is unknown
		must(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%d bytes: answer %d; want %d", tc.size, resp.StatusCode, tc.status)
		}
		if tc.status == http.StatusRequestEntityTooLarge && !resp.Close {
			t.Errorf("%d bytes: 413 without Connection: close", tc.size)
		}
	}
	if c := f.calls.Load(); c != 1 {
		t.Errorf("handler called %d times; want 1 (the body at the bound)", c)
	}
	nothingHeld(t, f.q)
}
