package lanehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// DefaultMaxBodyBytes is the largest body, in bytes, that [Middleware]
// reads for [Config.Decode] when [Config.MaxBodyBytes] is 0: 1 MiB, room
// for a chat message with its history; an upload of files wants its own
// bound.
const DefaultMaxBodyBytes = 1 << 20

// ErrBodyTooLarge is the error, wrapped, that [Config.Reject] is given for
// a request whose body is longer than [Config.MaxBodyBytes] (answered 413
// Content Too Large).
var ErrBodyTooLarge = errors.New("lanehttp: request body too large")

// A Decoder reads what a request's key and options come from (its body,
// typically JSON) once, into a D: set as [Config.Decode], it is called with
// the request and its body before Key and Options, and Key, Options and
// the handler read its value with [Decoder.From] rather than parsing the
// body again.
//
// The zero Decoder decodes the body as JSON into a D (encoding/json's
// Unmarshal); [NewDecoder] makes one that decodes otherwise. A Decoder
// holds no state of a request: one serves every request, concurrently.
type Decoder[D any] struct {
	decode func(r *http.Request, body []byte) (D, error) // nil: JSON
}

// NewDecoder returns a Decoder that decodes a request with decode, which is
// given the request (its Body reads body again) and its body, read whole
// within [Config.MaxBodyBytes]. An error answers 400 Bad Request (see
// [Config.Decode]). NewDecoder panics if decode is nil.
func NewDecoder[D any](decode func(r *http.Request, body []byte) (D, error)) *Decoder[D] {
	if decode == nil {
		panic("lanehttp: NewDecoder: decode is nil")
	}
	return &Decoder[D]{decode: decode}
}

// From returns the value d decoded for the request whose context (or a
// context derived from it) ctx is, and true; or the zero D and false if
// d decoded none for it (d is not the Config.Decode of a middleware this
// request went through). Key and Options are given a request whose
// context carries it, and so is the handler.
func (d *Decoder[D]) From(ctx context.Context) (D, bool) {
	v, ok := ctx.Value(decodedKey[D]{d}).(D)
	return v, ok
}

// decodeBody decodes r's body and returns ctx with the value in it.
func (d *Decoder[D]) decodeBody(ctx context.Context, r *http.Request, body []byte) (context.Context, error) {
	var v D
	var err error
	if d.decode != nil {
		v, err = d.decode(r, body)
	} else {
		err = json.Unmarshal(body, &v)
	}
	if err != nil {
		return nil, err
	}
	return context.WithValue(ctx, decodedKey[D]{d}, v), nil
}

// BodyDecoder is the type of [Config.Decode]: a [*Decoder] of any type.
// Only this package implements it.
type BodyDecoder interface {
	decodeBody(ctx context.Context, r *http.Request, body []byte) (context.Context, error)
	isNil() bool
}

// isNil reports whether d is a nil *Decoder, which Middleware refuses.
func (d *Decoder[D]) isNil() bool { return d == nil }

// decodedKey is the context key of the value that d decoded: one per
// Decoder, so that two of the same D do not read each other's values.
type decodedKey[D any] struct{ d *Decoder[D] }

// decode reads r's body for cfg.Decode and decodes it: it returns the
// request that Key, Options and the handler are given (its context
// carries the value, its Body reads body), body, and true; or it answers
// the request (413 or 400) and returns false.
func (cfg *Config[K]) decode(w http.ResponseWriter, r *http.Request) (*http.Request, []byte, bool) {
	body, err := readBody(w, r, cfg.MaxBodyBytes)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		cfg.answer(w, r, status, err)
		return nil, nil, false
	}
	r = withBody(r.Context(), r, body)
	ctx, err := cfg.Decode.decodeBody(r.Context(), r, body)
	if err != nil {
		cfg.answer(w, r, http.StatusBadRequest, err)
		return nil, nil, false
	}
	return withBody(ctx, r, body), body, true
}

// readBody reads r's body whole, up to max bytes. Its error wraps
// ErrBodyTooLarge for a body over max (told by its Content-Length before
// any byte is read, or by reading max+1 bytes), or is the read's.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, fmt.Errorf("%w: Content-Length %d, over Config.MaxBodyBytes (%d)", ErrBodyTooLarge, r.ContentLength, max)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	// MaxBytesReader, rather than a LimitReader, also has the server close
	// the connection after the answer instead of reading the rest of the
	// body to reuse it.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("%w: over Config.MaxBodyBytes (%d)", ErrBodyTooLarge, max)
		}
		return nil, err
	}
	return body, nil
}

// withBody returns a shallow copy of r with ctx and a Body that reads body
// from its start.
func withBody(ctx context.Context, r *http.Request, body []byte) *http.Request {
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}
