package lanehttp

import "time"

// ParseResetDuration is the parser of x-ratelimit-reset-* durations.
func ParseResetDuration(s string) (time.Duration, bool) { return parseDuration(s) }

// Saturated is the wait at which ParseResetDuration saturates.
const Saturated = saturated
