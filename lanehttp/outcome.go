package lanehttp

import (
	"bufio"
	"net"
	"net/http"
	"strconv"

	"github.com/sessionlane/lanes/adaptive"
)

// StatusError is the outcome [DefaultOutcome] reports for a handler's
// answer that says something went wrong: Status is the status the handler
// sent, and Err, if not nil, what it means to an observer of the lanes
// ([adaptive.ErrOverload] for 429 and 503). errors.Is and errors.As see
// through it to Err.
type StatusError struct {
	Status int
	Err    error
}

// Error returns "lanehttp: the handler answered 503 Service Unavailable",
// followed by Err's text when there is one.
func (e *StatusError) Error() string {
	s := "lanehttp: the handler answered " + strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *StatusError) Unwrap() error { return e.Err }

// DefaultOutcome is the outcome of a request whose handler answered
// status, when [Config.Outcome] is nil:
//   - 429 Too Many Requests, 503 Service Unavailable and 529 (a
//     provider's "overloaded", passed on): the handler (or the provider
//     behind it) is over its limit, a [*StatusError] wrapping
//     [adaptive.ErrOverload], which an adaptive controller counts as an
//     overload and answers by lowering the lane's limit;
//   - any other 5xx: a [*StatusError] wrapping nothing, which an adaptive
//     controller ignores (it says nothing about the limit);
//   - anything else (2xx, 3xx, 4xx other than 429): nil, a success.
func DefaultOutcome(status int) error {
	switch {
	case overloaded(status):
		return &StatusError{Status: status, Err: adaptive.ErrOverload}
	case status >= 500 && status <= 599:
		return &StatusError{Status: status}
	}
	return nil
}

// statusWriter is the ResponseWriter the handler is given: it notes the
// status the handler sends and passes everything through. Unwrap lets
// http.ResponseController reach the server's writer (deadlines, full
// duplex); FlushError, Flush and Hijack pass through, the last two also
// for handlers that assert http.Flusher or http.Hijacker.
type statusWriter struct {
	http.ResponseWriter
	status int // the final status sent; 0 until the header is written
}

func (w *statusWriter) WriteHeader(code int) {
	// 1xx answers other than 101 Switching Protocols are informational:
	// the final status comes after them.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK // as net/http sends
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes the server's writer, and returns its error (one
// wrapping http.ErrNotSupported if it cannot flush). It is the method
// http.ResponseController's Flush calls.
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK // a flush sends the header
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for handlers that assert http.Flusher, which has no
// way to return the error.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// Hijack takes the connection over from the server's writer, or returns
// an error wrapping http.ErrNotSupported if it cannot (HTTP/2).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sent is the status the request was answered with: the one the handler
// sent, or 200 if it sent none (what net/http sends for it).
func (w *statusWriter) sent() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
