package lanehttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/sessionlane/lanes/semaphore"
)

// usageTail is how much of the end of a response's body the transport
// keeps for [TransportConfig.Usage]: the usage of an answer comes at its
// end (the last fields of a JSON answer, the last events of a stream).
const usageTail = 16 << 10

// UsageJSON is a [TransportConfig.Usage] for the JSON answers of OpenAI's
// and Anthropic's APIs, whole or streamed as server-sent events (one JSON
// object a "data:" line). It reads the last "usage" object of tail (one
// whose value is null is passed over) and reports its total_tokens, or
// else prompt_tokens + completion_tokens (OpenAI), or else input_tokens +
// output_tokens (Anthropic); an object with output_tokens alone (the
// running count of Anthropic's stream) takes input_tokens from the
// nearest earlier usage object that has it. It reports false if it finds
// none of these, if that object is malformed or cut off, or if a count
// it reads is not a plain non-negative integer of at most
// [semaphore.MaxCapacity]. It ignores resp, and allocates nothing.
func UsageJSON(resp *http.Response, tail []byte) (tokens int64, ok bool) {
	_ = resp
	end := len(tail)
	wantIn := false // an output_tokens alone was found: its input is sought
	var out int64
	for {
		u, at, found := lastUsage(tail[:end])
		if !found {
			return 0, false
		}
		end = at
		switch {
		case u.bad:
			return 0, false
		case wantIn:
			if u.has&hasIn != 0 {
				return u.in + out, true
			}
		case u.has&hasTotal != 0:
			return u.total, true
		case u.has&(hasPrompt|hasCompletion) == hasPrompt|hasCompletion:
			return u.prompt + u.completion, true
		case u.has&(hasIn|hasOut) == hasIn|hasOut:
			return u.in + u.out, true
		case u.has&hasOut != 0:
			wantIn, out = true, u.out
		default:
			return 0, false
		}
	}
}

// The counts a usage object has.
const (
	hasTotal = 1 << iota
	hasPrompt
	hasCompletion
	hasIn
	hasOut
)

// usage is what a usage object says.
type usage struct {
	total, prompt, completion, in, out int64
	has                                int
	bad                                bool // malformed, cut off, or a count out of range
}

var usageKey = []byte(`"usage"`)

// lastUsage finds the last "usage" key of b whose value is an object and
// reads that object; at is where the key begins.
func lastUsage(b []byte) (u usage, at int, found bool) {
	for end := len(b); ; {
		i := bytes.LastIndex(b[:end], usageKey)
		if i < 0 {
			return usage{}, 0, false
		}
		end = i
		if i > 0 && b[i-1] == '\\' {
			continue // a quote within a string, not a key
		}
		j := skipSpace(b, i+len(usageKey))
		if j >= len(b) || b[j] != ':' {
			continue // a value "usage", not a key
		}
		j = skipSpace(b, j+1)
		if j >= len(b) || b[j] != '{' {
			continue // null, or not an object
		}
		return readUsage(b[j:]), i, true
	}
}

// readUsage reads the usage object that b begins with.
func readUsage(b []byte) (u usage) {
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return u
	}
	for {
		if i >= len(b) || b[i] != '"' {
			break
		}
		key, next, ok := skipString(b, i)
		if !ok {
			break
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			break
		}
		i = skipSpace(b, i+1)
		var dst *int64
		var bit int
		switch string(key) { // no allocation: the compiler compares in place
		case "total_tokens":
			dst, bit = &u.total, hasTotal
		case "prompt_tokens":
			dst, bit = &u.prompt, hasPrompt
		case "completion_tokens":
			dst, bit = &u.completion, hasCompletion
		case "input_tokens":
			dst, bit = &u.in, hasIn
		case "output_tokens":
			dst, bit = &u.out, hasOut
		}
		if dst != nil {
			n, next, ok := readCount(b, i)
			if !ok {
				break
			}
			*dst, u.has, i = n, u.has|bit, next
		} else if i, ok = skipValue(b, i); !ok {
			break
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '}':
			return u
		case ',':
			i = skipSpace(b, i+1)
			continue
		}
		break
	}
	return usage{bad: true}
}

// readCount reads the count at b[i:]: digits, then the end of the value.
func readCount(b []byte, i int) (n int64, next int, ok bool) {
	j := i
	for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		n = n*10 + int64(b[j]-'0')
		if n > semaphore.MaxCapacity {
			return 0, 0, false
		}
	}
	if j == i || (b[i] == '0' && j-i > 1) {
		return 0, 0, false // no digits, or a leading zero
	}
	if j < len(b) {
		switch b[j] {
		case ' ', '\t', '\r', '\n', ',', '}':
			return n, j, true
		}
	}
	return 0, 0, false // a fraction, an exponent, or cut off
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON's white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the content of the string that begins at b[i] and
// the index after it; a line's end within it is malformed (a stream's
// event cut off).
func skipString(b []byte, i int) (key []byte, next int, ok bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return b[i+1 : j], j + 1, true
		case '\n':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue returns the index after the value that begins at b[i]: a
// string, an object or an array (whatever they hold), or a literal.
func skipValue(b []byte, i int) (next int, ok bool) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			_, end, ok := skipString(b, j)
			if !ok {
				return 0, false
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, j > i
			}
			depth--
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return j, j > i
			}
		}
		if depth == 0 && (b[j] == '"' || b[j] == '}' || b[j] == ']') {
			return j + 1, true
		}
	}
	return 0, false
}

// usageBody is a laneBody that keeps the end of what the caller reads and
// settles the tokens lane from it, at EOF or at Close, before the lanes
// are released.
type usageBody[K comparable] struct {
	laneBody[K]
	resp  *http.Response
	usage func(*http.Response, []byte) (int64, bool)
	lane  string
	est   int64

	mu      sync.Mutex
	tail    []byte // what was read, its last usageTail bytes: a ring once full
	pos     int    // where the ring's oldest byte is
	settled bool
	failed  error // the settle's refusal, for Close to return once
}

func (b *usageBody[K]) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock() // Usage may panic
	if !b.settled {
		b.keep(p[:n])
		if err == io.EOF {
			b.settle(true)
		}
	}
	return n, err
}

// Close closes the body and, the first time, settles the tokens lane if
// EOF did not, then finishes the ticket (even if Usage panics). It
// returns the settle's refusal, once, with the body's own error.
func (b *usageBody[K]) Close() error {
	err := b.ReadCloser.Close()
	defer func() {
		if b.closed.CompareAndSwap(false, true) {
			b.t.Finish(b.outcome)
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.settled {
		b.settle(false)
	}
	if f := b.failed; f != nil {
		b.failed = nil
		if err == nil {
			return f
		}
		return errors.Join(err, f)
	}
	return err
}

// keep adds p to the tail; b.mu is held.
func (b *usageBody[K]) keep(p []byte) {
	if len(p) >= usageTail {
		b.tail, b.pos = append(b.tail[:0], p[len(p)-usageTail:]...), 0
		return
	}
	if room := usageTail - len(b.tail); room > 0 {
		k := min(room, len(p))
		b.tail, p = append(b.tail, p[:k]...), p[k:]
	}
	for len(p) > 0 {
		k := copy(b.tail[b.pos:], p)
		p, b.pos = p[k:], (b.pos+k)%usageTail
	}
}

// settle calls Usage with the tail, in order, and settles the ticket to
// what it reports: after EOF, whatever it is; before, only a count above
// the estimate, for what was read is then a lower bound. b.mu is held.
func (b *usageBody[K]) settle(eof bool) {
	b.settled = true
	tail := b.tail
	if b.pos != 0 { // rotate the ring in place: oldest byte first
		slices.Reverse(tail[:b.pos])
		slices.Reverse(tail[b.pos:])
		slices.Reverse(tail)
	}
	b.tail = nil
	n, ok := b.usage(b.resp, tail)
	switch {
	case !ok:
		return
	case n < 0:
		// Usage's own fault, not the answer's: said, not read as "no
		// count", which would hide it.
		b.failed = fmt.Errorf("lanehttp: TransportConfig.Usage reported %d tokens, a negative count; the estimate stands: %w", n, semaphore.ErrInvalidWeight)
		return
	case !eof && n <= b.est:
		return
	}
	// A refusal (a count out of range; a fleet lane's failed call: a lane
	// that settles nothing is refused by NewTransport) leaves the estimate
	// charged. It is Close's error, not Read's: the answer was read whole.
	b.failed = b.t.Settle(b.lane, n)
}
