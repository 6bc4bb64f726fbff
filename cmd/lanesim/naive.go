package main

import (
	"io"
	"os"
	"sync"
)

// naiveMap is the usual first fix of the serialising bug, written as it
// usually is: a map of one mutex per key, under a lock of its own, that
// drops a key's entry once it is idle (nobody holds it), so that it does
// not keep one entry per key ever seen. Its defect: "idle" counts the
// holders only, not a caller that has looked the entry up and waits for
// its mutex. The holder's release drops the entry under that caller's
// feet; the caller then takes the dropped entry's mutex, and the key's
// next caller finds no entry, makes a new one and takes it at once: two
// holders of one key. keyedsem counts a caller from its lookup on, and
// never evicts an entry that is held, waited for or being looked up.
type naiveMap[K comparable] struct {
	mu      sync.Mutex
	entries map[K]*naiveEntry
	evicted int // entries dropped
	under   int // of those, entries dropped while a caller that had looked them up waited
}

type naiveEntry struct {
	mu      sync.Mutex
	holders int // guarded by the map's mu
	looking int // callers between lookup and holding, for the report only (the map ignores them)
}

func newNaiveMap[K comparable]() *naiveMap[K] {
	return &naiveMap[K]{entries: map[K]*naiveEntry{}}
}

// lock takes key's mutex and returns its unlock.
func (m *naiveMap[K]) lock(key K) (unlock func()) {
	return m.hold(key, m.lookup(key))
}

// lookup returns key's entry, made if there is none: the first half of
// lock, apart so that a test can stop a caller between its lookup and its
// wait.
func (m *naiveMap[K]) lookup(key K) *naiveEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	if e == nil {
		e = &naiveEntry{}
		m.entries[key] = e
	}
	e.looking++
	return e
}

// hold waits for e's mutex (counted nowhere while it waits: the defect)
// and returns the unlock, which drops the entry if it leaves it idle.
func (m *naiveMap[K]) hold(key K, e *naiveEntry) (unlock func()) {
	e.mu.Lock()
	m.mu.Lock()
	e.holders++
	e.looking--
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if e.holders--; e.holders == 0 && m.entries[key] == e {
			delete(m.entries, key)
			m.evicted++
			if e.looking > 0 {
				m.under++
			}
		}
		m.mu.Unlock()
		e.mu.Unlock()
	}
}

// len returns the entries alive, the entries evicted so far, and how many
// of those were evicted while a caller waited for them.
func (m *naiveMap[K]) len() (alive, evicted, under int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries), m.evicted, m.under
}

// progressTo returns where the progress line goes: stderr if it is a
// terminal (a character device), else nowhere, so that a redirected or
// captured stderr gets no lines of \r-overwritten counts.
func progressTo(stderr io.Writer, quiet bool) io.Writer {
	f, ok := stderr.(*os.File)
	if quiet || !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return stderr
}
