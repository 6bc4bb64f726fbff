// Package fuzz holds the fuzz targets of lanes: FuzzSemaphore, FuzzKeyed
// and FuzzQueue run the model-based drivers of harness/modelcheck (the
// same drivers as the packages' TestSemaphoreMatchesModel,
// TestKeyedMatchesModel and TestQueueMatchesModel) through
// rapid.MakeFuzz: the fuzzer's bytes are rapid's draws, eight bytes a
// draw. Each drives the public API (acquire without waiting, acquire that
// may wait, with a priority on a semaphore made WithPriorities or a group
// on one made WithFairShare, cancel, release, release again, resize,
// close, sweep, move the fake clock) and checks every step against the
// sequential reference models of internal/model, plus the invariants:
// available + held == capacity, at most capacity holders per key, the
// model's order of service, no entry with references evicted, no partial
// ticket.
//
// A driver runs one operation at a time and waits, after each, until the
// real primitive has settled where the model says it must, so that a
// step's outcome is deterministic and a failing input replays. An input
// that runs out of bytes between two operations gets the end-of-run checks
// and is then skipped. The seeds under testdata/fuzz run with
// `go test ./fuzz/` (part of make test); `make fuzz` explores for FUZZTIME
// per target.
//
// Bounded barging's targets, FuzzBargingMatchesModel (semaphore) and
// FuzzBargingKeyMatchesModel (keyedsem), live beside their drivers in those
// packages' tests, whose hooks they need to see the barging state (the old
// waiters, the woken one, a key's strict bit); run them with
// `go test -fuzz` on those packages.
//
// The package has no API.
package fuzz
