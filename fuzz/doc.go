// Package fuzz holds the fuzz targets of lanes: FuzzSemaphore, FuzzKeyed
// and FuzzQueue turn bytes into sequences of operations on the public API
// (acquire without waiting, acquire in a goroutine that may wait, cancel,
// release, release again, resize, close, sweep, move the fake clock) and
// check every step against the sequential reference models of
// internal/model, plus the invariants: available + held == capacity,
// at most capacity holders per key, FIFO service, no entry with
// references evicted, no partial ticket.
//
// The driver runs one operation at a time and waits, after each, until the
// real primitive has settled where the model says it must (a waiter queued
// or woken), so that a step's outcome is deterministic and a failing input
// replays. The seeds under testdata/fuzz run with `go test ./fuzz/` (part
// of make test); `make fuzz` explores for FUZZTIME per target.
//
// The package has no API.
package fuzz
