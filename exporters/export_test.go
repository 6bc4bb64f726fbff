package exporters

import "time"

// SetGroupClock replaces the clock of w's idle check.
func SetGroupClock(w *GroupWaits, now func() time.Time) { w.now = now }
