// Package model holds simple sequential reference models of the lanes
// primitives, for property tests and fuzzers to compare the real,
// concurrent implementations against.
//
// A model has no goroutines, no locks and no clever data structures: each
// operation is applied at once, in the order the test calls it, and tells
// the test what the real primitive must do (grant, queue, fail, wake whom).
// Models favour obviousness over speed; they are for tests only.
package model
