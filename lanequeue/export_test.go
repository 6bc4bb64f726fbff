package lanequeue

import "unsafe"

// TicketSize is the size of a Ticket[string], pinned by TestTicketLayout:
// the Ticket is the one allocation of an AcquireAll.
const TicketSize = unsafe.Sizeof(Ticket[string]{})

// InlineLanes is how many lanes a Ticket holds without a second allocation.
const InlineLanes = inlineLanes
