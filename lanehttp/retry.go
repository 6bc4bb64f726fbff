package lanehttp

import (
	"net/http"
	"time"
)

// MaxRetryAfter is the longest retry time [RetryAfter] reports: a
// provider's hint beyond it (a daily quota's reset, a year-9999 date,
// "Retry-After: 99999999999999999999") reads as MaxRetryAfter.
//
// Providers limit requests and tokens per minute, so a hint within a few
// windows is the provider's real answer, and one beyond them is either a
// longer quota or a broken value. A retry time closes a lane to every
// caller, so one response must not close it for longer than five windows;
// after that the next attempt reads a fresh hint, and a quota that is
// really exhausted for hours costs one refused request per five minutes.
const MaxRetryAfter = 5 * time.Minute

// saturated stands for a retry time too long to add to or scale (about 146
// years): every parse below saturates at it instead of overflowing, and
// [RetryAfter] caps it at MaxRetryAfter like any long hint.
const saturated = time.Duration(1 << 62)

// The headers RetryAfter reads, in the form http.Header keeps them
// (textproto.CanonicalMIMEHeaderKey), so that a lookup is one map access
// and allocates nothing.
const (
	hdrRetryAfterMs = "Retry-After-Ms"
	hdrRetryAfter   = "Retry-After"
	hdrDate         = "Date"
)

// resetHeader is one limit's reset header and the header that says how
// much of that limit remains.
type resetHeader struct {
	reset, remaining string
	absolute         bool // reset is an RFC 3339 time; else a duration such as "6m0s"
	tokens           bool // the limit is of tokens (see TokensSpent)
}

// resetHeaders are the reset hints of OpenAI's API (durations) and of
// Anthropic's (RFC 3339 times), each with its limit's remaining count.
var resetHeaders = [...]resetHeader{
	{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Requests", false, false},
	{"X-Ratelimit-Reset-Tokens", "X-Ratelimit-Remaining-Tokens", false, true},
	{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Requests-Remaining", true, false},
	{"Anthropic-Ratelimit-Tokens-Reset", "Anthropic-Ratelimit-Tokens-Remaining", true, true},
	{"Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Input-Tokens-Remaining", true, true},
	{"Anthropic-Ratelimit-Output-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Remaining", true, true},
}

// RetryAfter reads from a provider's response how long to wait before the
// next attempt. It returns the wait and true when the response carries a
// usable hint, capped to [0, [MaxRetryAfter]]: a time in the past reads as
// 0, a wait beyond the cap as MaxRetryAfter (compare with it to tell). It
// returns 0 and false when it carries none, or only malformed ones (then
// the caller's own backoff decides). It reads the headers whatever the
// status; a [Classifier] decides which responses they matter for. It never
// panics, and allocates nothing unless a header it reads is malformed.
//
// It takes the first hint that parses, in this order, skipping a header
// that is absent or malformed:
//
//  1. retry-after-ms: milliseconds, possibly fractional ("1500",
//     "20.5"). It comes first: it is the more precise, and the providers
//     that send it send Retry-After beside it.
//  2. Retry-After (RFC 9110): delay-seconds ("120"; a fraction such as
//     "1.5" is accepted too), or an HTTP-date in any of the three forms
//     [http.ParseTime] accepts.
//  3. The limits' reset hints, which say when a limit is replenished
//     rather than when to retry: x-ratelimit-reset-requests and
//     x-ratelimit-reset-tokens (durations such as "6m0s", "20ms",
//     "1h2m3.5s"), and anthropic-ratelimit-requests-reset, -tokens-reset,
//     -input-tokens-reset and -output-tokens-reset (RFC 3339 times). The
//     wait is the latest reset among the limits whose remaining header
//     (x-ratelimit-remaining-requests, anthropic-ratelimit-tokens-remaining
//     and so on) says 0: those are the limits that refused the request, and
//     a retry needs all of them back. When no limit says 0 (the headers do
//     not tell which one refused), it is the latest of all the resets
//     present: waiting for the earliest would retry into the limit that is
//     still out, and each refusal would hint the same early reset again,
//     which is the storm a retry time is meant to prevent.
//
// A number has no sign (a negative one is malformed), is decimal (no
// exponent, NaN or Inf), and may be surrounded by spaces or tabs; one too
// large to represent is not malformed, it is a long wait and is capped.
// A header given twice is read at its first value.
//
// Times (an HTTP-date, an RFC 3339 reset) are measured from the response's
// Date header when it parses, both being the provider's clock, so a skew
// between the provider's clock and this machine's does not shift the wait
// (the wait then runs from when the provider sent the response, longer by
// the response's transit and Date's truncation to the second); from now
// otherwise. Delays and durations are measured from now, the time the
// caller received the response.
func RetryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	c := hintReader{h: resp.Header, now: now}
	if d, ok := parseDecimal(first(c.h, hdrRetryAfterMs), time.Millisecond); ok {
		return capHint(d), true
	}
	if d, ok := c.retryAfter(first(c.h, hdrRetryAfter)); ok {
		return capHint(d), true
	}
	return c.resets()
}

// TokensSpent reports whether resp says that the provider's token budget
// is spent: one of its remaining-tokens headers (x-ratelimit-remaining-tokens,
// anthropic-ratelimit-tokens-remaining, -input-tokens-remaining or
// -output-tokens-remaining) reads 0. A refusal with none of them, or with
// other limits at 0 only, was not of the tokens. It does not tell the
// kinds apart: a TokensLane that counts one kind (Anthropic's input
// tokens, say) is told its window is spent by a refusal of another (the
// output tokens) too, which holds it back for up to a window; a
// [Classifier] that sets [Verdict].TokensSpent only for the lane's own
// kind avoids that. It never panics and allocates nothing.
func TokensSpent(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	for _, r := range &resetHeaders {
		if r.tokens && isZeroCount(first(resp.Header, r.remaining)) {
			return true
		}
	}
	return false
}

// hintReader reads the hints of one response: h is its header, now the
// time it was received, and ref, once refSet, the time its absolute hints
// are measured from.
type hintReader struct {
	h      http.Header
	now    time.Time
	ref    time.Time
	refSet bool
}

// until is the wait from the response to t, saturated rather than
// overflowing (time.Time.Sub saturates).
func (c *hintReader) until(t time.Time) time.Duration {
	if !c.refSet {
		c.ref, c.refSet = c.now, true
		if v := first(c.h, hdrDate); v != "" {
			if d, err := http.ParseTime(v); err == nil {
				c.ref = d
			}
		}
	}
	return t.Sub(c.ref)
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP-date.
func (c *hintReader) retryAfter(v string) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) || v[0] == '.' {
		return parseDecimal(v, time.Second)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return c.until(t), true
}

// resets reads the reset headers, as RetryAfter documents (step 3).
func (c *hintReader) resets() (time.Duration, bool) {
	var latest, latestOut time.Duration
	var found, foundOut bool
	for _, r := range &resetHeaders {
		v := first(c.h, r.reset)
		if v == "" {
			continue
		}
		var d time.Duration
		if r.absolute {
			t, err := time.Parse(time.RFC3339, trimOWS(v))
			if err != nil {
				continue
			}
			d = c.until(t)
		} else {
			var ok bool
			if d, ok = parseDuration(v); !ok {
				continue
			}
		}
		if !found || d > latest {
			latest, found = d, true
		}
		if isZeroCount(first(c.h, r.remaining)) && (!foundOut || d > latestOut) {
			latestOut, foundOut = d, true
		}
	}
	switch {
	case foundOut:
		return capHint(latestOut), true
	case found:
		return capHint(latest), true
	}
	return 0, false
}

// capHint bounds a parsed hint to [0, MaxRetryAfter].
func capHint(d time.Duration) time.Duration {
	return max(0, min(d, MaxRetryAfter))
}

// first is h's first value for the canonical key k, or "".
func first(h http.Header, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// trimOWS removes the optional whitespace (spaces and tabs, RFC 9110
// section 5.6.3) around a header value.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// isZeroCount says whether a remaining header says 0: one or more '0'
// digits and nothing else.
func isZeroCount(s string) bool {
	s = trimOWS(s)
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// parseDecimal parses the whole of s (spaces and tabs around it aside) as
// an unsigned decimal number of units.
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	n, rest, ok := readDecimal(trimOWS(s))
	if !ok || rest != "" {
		return 0, false
	}
	return n.times(unit), true
}

// decimal is an unsigned decimal number read from a header: whole + num/den,
// or, when huge, one with too many digits to hold (over 4.6e17 units: years
// even in nanoseconds).
type decimal struct {
	whole    uint64
	num, den uint64 // the fraction's first maxFracDigits digits over 10^digits
	huge     bool
}

// maxFracDigits is how many digits of a fraction count: 10^18 still fits
// in a uint64, and a nanosecond of an hour is only the 13th digit.
const maxFracDigits = 18

// readDecimal reads digits, a '.', and digits at the start of s, at least
// one digit in all. It returns the number and the rest of s.
func readDecimal(s string) (decimal, string, bool) {
	n := decimal{den: 1}
	i, digits := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
		if n.whole > uint64(saturated)/10 {
			n.huge = true // past any wait worth reading: read the digits, keep none
			continue
		}
		n.whole = n.whole*10 + uint64(s[i]-'0')
	}
	if i < len(s) && s[i] == '.' {
		i++
		for f := 0; i < len(s) && isDigit(s[i]); i, f = i+1, f+1 {
			digits++
			if f < maxFracDigits {
				n.num = n.num*10 + uint64(s[i]-'0')
				n.den *= 10
			}
		}
	}
	return n, s[i:], digits > 0
}

// times is n units, saturated.
func (n decimal) times(unit time.Duration) time.Duration {
	u := uint64(unit)
	if n.huge || n.whole > uint64(saturated)/u {
		return saturated
	}
	d := n.whole * u
	// num/den < 1, so the fraction is less than one unit (at most an hour,
	// 3.6e12 ns): float64 holds it to the nanosecond, rounded.
	d += uint64(float64(n.num)/float64(n.den)*float64(u) + 0.5)
	return min(time.Duration(d), saturated)
}

// parseDuration parses a duration as OpenAI's reset headers write it, in
// the form of [time.ParseDuration] without a sign: one or more numbers,
// each with a unit (ns, us, µs, ms, s, m, h), as in "6m0s", "20ms",
// "1h2m3.5s", or "0" alone. Unlike time.ParseDuration it saturates instead
// of failing on a duration too long to represent, and allocates nothing.
func parseDuration(s string) (time.Duration, bool) {
	s = trimOWS(s)
	if s == "0" {
		return 0, true
	}
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		n, rest, ok := readDecimal(s)
		if !ok {
			return 0, false
		}
		i := 0
		for i < len(rest) && !isDigit(rest[i]) && rest[i] != '.' {
			i++
		}
		var unit time.Duration
		switch rest[:i] {
		case "ns":
			unit = time.Nanosecond
		case "us", "µs", "μs": // U+00B5 micro sign, U+03BC Greek mu, as time.ParseDuration
			unit = time.Microsecond
		case "ms":
			unit = time.Millisecond
		case "s":
			unit = time.Second
		case "m":
			unit = time.Minute
		case "h":
			unit = time.Hour
		default:
			return 0, false
		}
		if d := n.times(unit); d < saturated-total {
			total += d
		} else {
			total = saturated
		}
		s = rest[i:]
	}
	return total, true
}
