package lanehttp_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlane/lanes/lanehttp"
)

// FuzzRetryAfter: whatever the hints' values, RetryAfter does not panic,
// reports a wait within [0, MaxRetryAfter] (0 when it reports none), and
// DefaultClassifier carries that wait on a 429; each parser agrees with
// the standard library's where both read a value: retry-after-ms with
// strconv.ParseFloat, an HTTP-date with http.ParseTime, a reset duration
// with time.ParseDuration.
func FuzzRetryAfter(f *testing.F) {
	f.Add("1500", "20", "6m0s", "2026-12-02T05:00:20Z", "0", "Wed, 02 Dec 2026 05:00:00 GMT")
	f.Add("", "Wed, 02 Dec 2026 05:00:30 GMT", "1h2m3.5s", "9999-12-31T23:59:59Z", "12", "")
	f.Add("99999999999999999999", "99999999999999999999", "99999999999999999999h", "0001-01-01T00:00:00Z", "", "Mon, 01 Jan 0001 00:00:00 GMT")
	f.Add("-1", "-1", "-1s", "yesterday", "-0", "tomorrow")
	f.Add("NaN", "Wednesday, 02-Dec-26 05:00:30 GMT", "20ms", "2026-12-02T06:00:20+01:00", "0", "Wed Dec  2 05:00:30 2026")
	f.Add(".5", "1.5", "1.5µs", "2026-12-02T05:00:00.25Z", "000", "")
	f.Add("1e3", "Inf", "0", "", "", "")
	f.Add("", "", "", "2020-01-01T00:00:00Z", "0", "")
	f.Add("", "Mon, 01 Jan 0001 00:00:00 GMT", "", "", "", "")
	f.Fuzz(func(t *testing.T, ms, ra, reset, anthReset, remaining, date string) {
		h := make(http.Header)
		set := func(k, v string) {
			if v != "" {
				h.Set(k, v)
			}
		}
		set("retry-after-ms", ms)
		set("retry-after", ra)
		set("x-ratelimit-reset-requests", reset)
		set("x-ratelimit-remaining-requests", remaining)
		set("x-ratelimit-reset-tokens", "1s")
		set("anthropic-ratelimit-tokens-reset", anthReset)
		set("anthropic-ratelimit-tokens-remaining", remaining)
		set("date", date)
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
		d, ok := lanehttp.RetryAfter(resp, received)
		if d < 0 || d > lanehttp.MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("RetryAfter = (%v, %v); want a wait in [0, %v], 0 without a hint", d, ok, lanehttp.MaxRetryAfter)
		}
		v := lanehttp.DefaultClassifier(lanehttp.Attempt{Response: resp, Now: received})
		if want := (lanehttp.Verdict{Retry: true, Overload: true, After: d, HasAfter: ok, TokensSpent: lanehttp.TokensSpent(resp)}); v != want {
			t.Fatalf("DefaultClassifier of the 429 = %+v; want %+v", v, want)
		}

		capped := func(d time.Duration) time.Duration { return max(0, min(d, lanehttp.MaxRetryAfter)) }
		only := func(k, v string) (time.Duration, bool) {
			h := make(http.Header)
			h.Set(k, v)
			return lanehttp.RetryAfter(&http.Response{Header: h}, received)
		}
		if isPlainDecimal(ms) {
			x, err := strconv.ParseFloat(ms, 64)
			got, ok := only("retry-after-ms", ms)
			if err == nil && x*1e6 < float64(lanehttp.MaxRetryAfter) {
				if diff := float64(got) - x*1e6; !ok || diff > 1 || diff < -1 {
					t.Fatalf("retry-after-ms %q = (%v, %v); strconv.ParseFloat reads %v ms", ms, got, ok, x)
				}
			}
		}
		if at, err := http.ParseTime(ra); err == nil && ra != "" && !isDigit(ra[0]) && ra[0] != '.' {
			got, ok := only("retry-after", ra)
			if want := capped(at.Sub(received)); !ok || got != want {
				t.Fatalf("Retry-After %q = (%v, %v); http.ParseTime reads %v, want %v", ra, got, ok, at, want)
			}
		}
		if std, err := time.ParseDuration(reset); err == nil && reset[0] != '-' && reset[0] != '+' {
			got, ok := lanehttp.ParseResetDuration(reset)
			diff := got - min(std, lanehttp.Saturated)
			// Each number's fraction is rounded to the nanosecond, where
			// time.ParseDuration truncates it.
			if !ok || diff < -time.Duration(len(reset)) || diff > time.Duration(len(reset)) {
				t.Fatalf("duration %q = (%v, %v); time.ParseDuration reads %v", reset, got, ok, std)
			}
		}
	})
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// isPlainDecimal says whether s is digits with at most one '.', at least
// one digit: what retry-after-ms accepts (spaces aside).
func isPlainDecimal(s string) bool {
	if strings.Count(s, ".") > 1 || strings.Trim(s, ".") == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}
