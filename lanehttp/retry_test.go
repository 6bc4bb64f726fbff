package lanehttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanehttp"
)

// received is when the tests' responses came back: the "now" of every
// retry time below.
var received = time.Date(2026, time.December, 2, 5, 0, 0, 0, time.UTC)

// response returns a response whose header holds the name/value pairs in
// kv, the names given in lower case, as providers send them on HTTP/2
// (http.Header.Add puts them in canonical form, as net/http does with a
// response it reads).
func response(status int, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h}
}

// hint is what RetryAfter should return.
type hint struct {
	d  time.Duration
	ok bool
}

var none = hint{}

func wait(d time.Duration) hint { return hint{d, true} }

type retryCase struct {
	name string
	kv   []string
	want hint
}

func runRetryCases(t *testing.T, cases []retryCase) {
	t.Helper()
	for _, c := range cases {
		d, ok := lanehttp.RetryAfter(response(http.StatusTooManyRequests, c.kv...), received)
		if got := (hint{d, ok}); got != c.want {
			t.Errorf("%s: %q: RetryAfter = (%v, %v); want (%v, %v)", c.name, c.kv, d, ok, c.want.d, c.want.ok)
		}
	}
}

// TestRetryAfterMs: retry-after-ms is milliseconds, possibly fractional;
// a value that is not an unsigned decimal is skipped; one too large is
// capped.
func TestRetryAfterMs(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"whole", []string{"retry-after-ms", "1500"}, wait(1500 * time.Millisecond)},
		{"fraction", []string{"retry-after-ms", "20.5"}, wait(20500 * time.Microsecond)},
		{"fraction to the ns", []string{"retry-after-ms", "0.000001"}, wait(time.Nanosecond)},
		{"fraction beyond the ns", []string{"retry-after-ms", "1.0000004999"}, wait(time.Millisecond)},
		{"no whole part", []string{"retry-after-ms", ".5"}, wait(500 * time.Microsecond)},
		{"no fraction digits", []string{"retry-after-ms", "7."}, wait(7 * time.Millisecond)},
		{"zero", []string{"retry-after-ms", "0"}, wait(0)},
		{"spaces around", []string{"retry-after-ms", " \t250 "}, wait(250 * time.Millisecond)},
		{"at the cap", []string{"retry-after-ms", "300000"}, wait(lanehttp.MaxRetryAfter)},
		{"past the cap", []string{"retry-after-ms", "300000.001"}, wait(lanehttp.MaxRetryAfter)},
		{"overflow", []string{"retry-after-ms", "99999999999999999999"}, wait(lanehttp.MaxRetryAfter)},
		{"overflow with a fraction", []string{"retry-after-ms", "99999999999999999999999999999.9"}, wait(lanehttp.MaxRetryAfter)},
		{"long fraction", []string{"retry-after-ms", "1.99999999999999999999999999"}, wait(2 * time.Millisecond)},
		{"negative", []string{"retry-after-ms", "-5"}, none},
		{"plus sign", []string{"retry-after-ms", "+5"}, none},
		{"NaN", []string{"retry-after-ms", "NaN"}, none},
		{"Inf", []string{"retry-after-ms", "Inf"}, none},
		{"exponent", []string{"retry-after-ms", "1e3"}, none},
		{"hex", []string{"retry-after-ms", "0x10"}, none},
		{"underscore", []string{"retry-after-ms", "1_000"}, none},
		{"two points", []string{"retry-after-ms", "1.2.3"}, none},
		{"point alone", []string{"retry-after-ms", "."}, none},
		{"unit", []string{"retry-after-ms", "20ms"}, none},
		{"inner space", []string{"retry-after-ms", "1 000"}, none},
		{"empty", []string{"retry-after-ms", ""}, none},
	})
}

// TestRetryAfterSeconds: Retry-After as delay-seconds (a fraction
// accepted), capped, and malformed values skipped.
func TestRetryAfterSeconds(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"seconds", []string{"retry-after", "120"}, wait(2 * time.Minute)},
		{"zero", []string{"retry-after", "0"}, wait(0)},
		{"fraction", []string{"retry-after", "1.5"}, wait(1500 * time.Millisecond)},
		{"spaces around", []string{"retry-after", " 20\t"}, wait(20 * time.Second)},
		{"at the cap", []string{"retry-after", "300"}, wait(lanehttp.MaxRetryAfter)},
		{"past the cap", []string{"retry-after", "301"}, wait(lanehttp.MaxRetryAfter)},
		{"overflow", []string{"retry-after", "99999999999999999999"}, wait(lanehttp.MaxRetryAfter)},
		{"int64 seconds overflow", []string{"retry-after", "9223372036854775807"}, wait(lanehttp.MaxRetryAfter)},
		{"nanoseconds overflow", []string{"retry-after", "9223372037"}, wait(lanehttp.MaxRetryAfter)},
		{"negative", []string{"retry-after", "-1"}, none},
		{"NaN", []string{"retry-after", "NaN"}, none},
		{"Infinity", []string{"retry-after", "Infinity"}, none},
		{"unit", []string{"retry-after", "20s"}, none},
		{"word", []string{"retry-after", "soon"}, none},
		{"empty", []string{"retry-after", ""}, none},
		{"first of two", []string{"retry-after", "5", "retry-after", "10"}, wait(5 * time.Second)},
		{"first of two malformed", []string{"retry-after", "x", "retry-after", "10"}, none},
	})
}

// TestRetryAfterHTTPDate: Retry-After as an HTTP-date in each of the three
// forms, from now or, when it parses, from the response's Date; a date
// past is 0, one far ahead is capped.
func TestRetryAfterHTTPDate(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"IMF-fixdate", []string{"retry-after", "Wed, 02 Dec 2026 05:00:30 GMT"}, wait(30 * time.Second)},
		{"RFC 850", []string{"retry-after", "Wednesday, 02-Dec-26 05:00:30 GMT"}, wait(30 * time.Second)},
		{"asctime", []string{"retry-after", "Wed Dec  2 05:00:30 2026"}, wait(30 * time.Second)},
		{"spaces around", []string{"retry-after", " Wed, 02 Dec 2026 05:01:00 GMT "}, wait(time.Minute)},
		{"now", []string{"retry-after", "Wed, 02 Dec 2026 05:00:00 GMT"}, wait(0)},
		{"past", []string{"retry-after", "Tue, 01 Dec 2026 05:00:00 GMT"}, wait(0)},
		{"long past", []string{"retry-after", "Mon, 01 Jan 0001 00:00:00 GMT"}, wait(0)},
		{"past the cap", []string{"retry-after", "Wed, 02 Dec 2026 05:05:01 GMT"}, wait(lanehttp.MaxRetryAfter)},
		{"year 9999", []string{"retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"}, wait(lanehttp.MaxRetryAfter)},
		{"no such day", []string{"retry-after", "Mon, 31 Feb 2026 05:00:30 GMT"}, none},
		{"no zone", []string{"retry-after", "Wed, 02 Dec 2026 05:00:30"}, none},
		{"RFC 3339", []string{"retry-after", "2026-12-02T05:00:30Z"}, none},

		// The provider's clock is 10 s behind this machine's: its Date
		// says 04:59:50, and it asks for 30 s from then.
		{"from Date", []string{"date", "Wed, 02 Dec 2026 04:59:50 GMT", "retry-after", "Wed, 02 Dec 2026 05:00:20 GMT"}, wait(30 * time.Second)},
		{"from Date, past", []string{"date", "Wed, 02 Dec 2026 05:00:50 GMT", "retry-after", "Wed, 02 Dec 2026 05:00:20 GMT"}, wait(0)},
		{"malformed Date: from now", []string{"date", "yesterday", "retry-after", "Wed, 02 Dec 2026 05:00:20 GMT"}, wait(20 * time.Second)},
		{"Date does not apply to seconds", []string{"date", "Wed, 02 Dec 2026 04:00:00 GMT", "retry-after", "20"}, wait(20 * time.Second)},
	})
}

// TestRetryAfterOpenAIResets: x-ratelimit-reset-* as Go-like durations,
// with their malformed and huge forms.
func TestRetryAfterOpenAIResets(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"seconds", []string{"x-ratelimit-reset-requests", "1s"}, wait(time.Second)},
		{"milliseconds", []string{"x-ratelimit-reset-requests", "20ms"}, wait(20 * time.Millisecond)},
		{"minutes and seconds", []string{"x-ratelimit-reset-tokens", "2m3.5s"}, wait(123500 * time.Millisecond)},
		{"fractional minutes", []string{"x-ratelimit-reset-tokens", "1.5m"}, wait(90 * time.Second)},
		{"micro", []string{"x-ratelimit-reset-tokens", "100us"}, wait(100 * time.Microsecond)},
		{"micro sign", []string{"x-ratelimit-reset-tokens", "100µs"}, wait(100 * time.Microsecond)},
		{"Greek mu", []string{"x-ratelimit-reset-tokens", "100μs"}, wait(100 * time.Microsecond)},
		{"nanoseconds", []string{"x-ratelimit-reset-tokens", "7ns"}, wait(7 * time.Nanosecond)},
		{"zero", []string{"x-ratelimit-reset-tokens", "0"}, wait(0)},
		{"zero seconds", []string{"x-ratelimit-reset-tokens", "0s"}, wait(0)},
		{"6m0s past the cap", []string{"x-ratelimit-reset-tokens", "6m0s"}, wait(lanehttp.MaxRetryAfter)},
		{"1h2m3.5s past the cap", []string{"x-ratelimit-reset-tokens", "1h2m3.5s"}, wait(lanehttp.MaxRetryAfter)},
		{"overflow", []string{"x-ratelimit-reset-tokens", "99999999999999999999h"}, wait(lanehttp.MaxRetryAfter)},
		{"overflow of the sum", []string{"x-ratelimit-reset-tokens", "2562047h2562047h2562047h"}, wait(lanehttp.MaxRetryAfter)},
		{"negative", []string{"x-ratelimit-reset-tokens", "-1s"}, none},
		{"plus sign", []string{"x-ratelimit-reset-tokens", "+1s"}, none},
		{"no unit", []string{"x-ratelimit-reset-tokens", "5"}, none},
		{"unknown unit", []string{"x-ratelimit-reset-tokens", "1d"}, none},
		{"unit alone", []string{"x-ratelimit-reset-tokens", "s"}, none},
		{"trailing number", []string{"x-ratelimit-reset-tokens", "1s2"}, none},
		{"upper case unit", []string{"x-ratelimit-reset-tokens", "1S"}, none},
		{"inner space", []string{"x-ratelimit-reset-tokens", "1m 2s"}, none},
		{"empty", []string{"x-ratelimit-reset-tokens", ""}, none},
	})
}

// TestRetryAfterAnthropicResets: anthropic-ratelimit-*-reset as RFC 3339
// times, from now or from the response's Date.
func TestRetryAfterAnthropicResets(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"requests", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:20Z"}, wait(20 * time.Second)},
		{"tokens", []string{"anthropic-ratelimit-tokens-reset", "2026-12-02T05:00:21Z"}, wait(21 * time.Second)},
		{"input tokens", []string{"anthropic-ratelimit-input-tokens-reset", "2026-12-02T05:00:22Z"}, wait(22 * time.Second)},
		{"output tokens", []string{"anthropic-ratelimit-output-tokens-reset", "2026-12-02T05:00:23Z"}, wait(23 * time.Second)},
		{"fraction", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:00.25Z"}, wait(250 * time.Millisecond)},
		{"offset", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T06:00:20+01:00"}, wait(20 * time.Second)},
		{"past", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T04:59:00Z"}, wait(0)},
		{"past the cap", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T05:10:00Z"}, wait(lanehttp.MaxRetryAfter)},
		{"year 9999", []string{"anthropic-ratelimit-requests-reset", "9999-12-31T23:59:59Z"}, wait(lanehttp.MaxRetryAfter)},
		{"HTTP-date", []string{"anthropic-ratelimit-requests-reset", "Wed, 02 Dec 2026 05:00:20 GMT"}, none},
		{"no zone", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:20"}, none},
		{"duration", []string{"anthropic-ratelimit-requests-reset", "20s"}, none},
		{"from Date", []string{"date", "Wed, 02 Dec 2026 04:59:50 GMT", "anthropic-ratelimit-requests-reset", "2026-12-02T05:00:20Z"}, wait(30 * time.Second)},
	})
}

// TestRetryAfterPrecedence: retry-after-ms, then Retry-After, then the
// resets, each skipped when absent or malformed.
func TestRetryAfterPrecedence(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"ms before seconds", []string{"retry-after", "2", "retry-after-ms", "1500"}, wait(1500 * time.Millisecond)},
		{"malformed ms: seconds", []string{"retry-after-ms", "soon", "retry-after", "2"}, wait(2 * time.Second)},
		{"ms before a date", []string{"retry-after-ms", "10", "retry-after", "Wed, 02 Dec 2026 05:00:30 GMT"}, wait(10 * time.Millisecond)},
		{"seconds before resets", []string{"retry-after", "20", "x-ratelimit-reset-requests", "1s", "anthropic-ratelimit-requests-reset", "2026-12-02T05:00:40Z"}, wait(20 * time.Second)},
		{"past date before resets", []string{"retry-after", "Tue, 01 Dec 2026 05:00:00 GMT", "x-ratelimit-reset-requests", "1s"}, wait(0)},
		{"malformed seconds: resets", []string{"retry-after", "-3", "x-ratelimit-reset-requests", "1s"}, wait(time.Second)},
		{"malformed everything", []string{"retry-after-ms", "x", "retry-after", "y", "x-ratelimit-reset-requests", "z", "anthropic-ratelimit-tokens-reset", "w"}, none},
		{"malformed reset skipped", []string{"x-ratelimit-reset-requests", "z", "x-ratelimit-reset-tokens", "3s"}, wait(3 * time.Second)},
		{"capped ms still wins", []string{"retry-after-ms", "99999999999999999999", "retry-after", "1"}, wait(lanehttp.MaxRetryAfter)},
		{"no hint", []string{"x-ratelimit-remaining-requests", "0", "content-type", "application/json"}, none},
	})
	if d, ok := lanehttp.RetryAfter(nil, received); d != 0 || ok {
		t.Errorf("RetryAfter(nil) = (%v, %v); want (0, false)", d, ok)
	}
	if d, ok := lanehttp.RetryAfter(&http.Response{StatusCode: http.StatusTooManyRequests}, received); d != 0 || ok {
		t.Errorf("RetryAfter of a response with a nil Header = (%v, %v); want (0, false)", d, ok)
	}
}

// TestRetryAfterResetOfTheLimitHit: among the resets, the latest of the
// limits whose remaining count is 0; when none says 0, the latest of all.
func TestRetryAfterResetOfTheLimitHit(t *testing.T) {
	runRetryCases(t, []retryCase{
		{"OpenAI requests out", []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "149000", "x-ratelimit-reset-tokens", "20s",
		}, wait(time.Second)},
		{"OpenAI tokens out", []string{
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "12.5s",
		}, wait(12500 * time.Millisecond)},
		{"OpenAI both out: the later", []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "40s",
			"x-ratelimit-remaining-tokens", "000", "x-ratelimit-reset-tokens", "12.5s",
		}, wait(40 * time.Second)},
		{"OpenAI none out: the latest", []string{
			"x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "500", "x-ratelimit-reset-tokens", "20s",
		}, wait(20 * time.Second)},
		{"no remaining counts: the latest", []string{
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "20s",
		}, wait(20 * time.Second)},
		{"malformed remaining counts as unknown", []string{
			"x-ratelimit-remaining-requests", "none", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-remaining-tokens", "-0", "x-ratelimit-reset-tokens", "20s",
		}, wait(20 * time.Second)},
		{"out limit's reset malformed: the latest", []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "soon",
			"x-ratelimit-remaining-tokens", "5", "x-ratelimit-reset-tokens", "20s",
		}, wait(20 * time.Second)},
		{"Anthropic input tokens out", []string{
			"anthropic-ratelimit-requests-remaining", "10", "anthropic-ratelimit-requests-reset", "2026-12-02T05:01:00Z",
			"anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2026-12-02T05:00:40Z",
			"anthropic-ratelimit-input-tokens-remaining", " 0 ", "anthropic-ratelimit-input-tokens-reset", "2026-12-02T05:00:30Z",
			"anthropic-ratelimit-output-tokens-remaining", "8000", "anthropic-ratelimit-output-tokens-reset", "2026-12-02T05:00:50Z",
		}, wait(40 * time.Second)},
		{"Anthropic output tokens out", []string{
			"anthropic-ratelimit-requests-remaining", "10", "anthropic-ratelimit-requests-reset", "2026-12-02T05:01:00Z",
			"anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", "2026-12-02T05:00:05Z",
		}, wait(5 * time.Second)},
		{"Anthropic requests out, reset past", []string{
			"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-12-02T04:59:59Z",
			"anthropic-ratelimit-tokens-remaining", "100", "anthropic-ratelimit-tokens-reset", "2026-12-02T05:00:40Z",
		}, wait(0)},
	})
}

// typical429s are the header sets of the benchmarks and the allocation
// test: what providers send with a 429.
var typical429s = []struct {
	name string
	resp *http.Response
}{
	{"anthropic", response(http.StatusTooManyRequests,
		"date", "Wed, 02 Dec 2026 05:00:00 GMT",
		"retry-after", "20",
		"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "0",
		"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:20Z",
		"anthropic-ratelimit-tokens-limit", "40000",
		"anthropic-ratelimit-tokens-remaining", "38000",
		"anthropic-ratelimit-tokens-reset", "2026-12-02T05:00:03Z",
	)},
	{"azure", response(http.StatusTooManyRequests,
		"retry-after", "1",
		"retry-after-ms", "350",
		"x-ratelimit-remaining-requests", "0",
		"x-ratelimit-remaining-tokens", "2000",
	)},
	{"openai-resets", response(http.StatusTooManyRequests,
		"date", "Wed, 02 Dec 2026 05:00:00 GMT",
		"x-ratelimit-limit-requests", "60",
		"x-ratelimit-limit-tokens", "150000",
		"x-ratelimit-remaining-requests", "59",
		"x-ratelimit-remaining-tokens", "0",
		"x-ratelimit-reset-requests", "1s",
		"x-ratelimit-reset-tokens", "6m0s",
	)},
	{"anthropic-resets", response(http.StatusTooManyRequests,
		"date", "Wed, 02 Dec 2026 05:00:00 GMT",
		"anthropic-ratelimit-requests-remaining", "0",
		"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:20Z",
		"anthropic-ratelimit-tokens-remaining", "38000",
		"anthropic-ratelimit-tokens-reset", "2026-12-02T05:00:03Z",
	)},
	{"http-date", response(http.StatusServiceUnavailable,
		"date", "Wed, 02 Dec 2026 05:00:00 GMT",
		"retry-after", "Wed, 02 Dec 2026 05:00:30 GMT",
	)},
}

// TestRetryAfterOfTypical429sAllocatesNothing: reading the hints that
// providers send (well formed) allocates nothing, nor does classifying.
func TestRetryAfterOfTypical429sAllocatesNothing(t *testing.T) {
	testkit.SkipUnlessAllocsCount(t)
	for _, r := range typical429s {
		if _, ok := lanehttp.RetryAfter(r.resp, received); !ok {
			t.Fatalf("%s: no hint read", r.name)
		}
		testkit.NoAllocs(t, r.name, func() { lanehttp.RetryAfter(r.resp, received) })
		a := lanehttp.Attempt{Request: &http.Request{Method: http.MethodPost}, Response: r.resp, Now: received}
		testkit.NoAllocs(t, r.name+" classified", func() { lanehttp.DefaultClassifier(a) })
	}
}

var sinkHint time.Duration

// BenchmarkRetryAfter reads the hints of the typical 429s.
func BenchmarkRetryAfter(b *testing.B) {
	for _, r := range typical429s {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				d, _ := lanehttp.RetryAfter(r.resp, received)
				sinkHint += d
			}
		})
	}
}

// BenchmarkDefaultClassifier classifies Anthropic's typical 429.
func BenchmarkDefaultClassifier(b *testing.B) {
	a := lanehttp.Attempt{Request: &http.Request{Method: http.MethodPost}, Response: typical429s[0].resp, Now: received}
	b.ReportAllocs()
	for range b.N {
		sinkHint += lanehttp.DefaultClassifier(a).After
	}
}
