package semaphore

// Turn says where a waiter joins the line when it must wait: the zero Turn
// is plain FIFO. A field counts only on a semaphore built with the policy
// that orders by it; a field set without that policy is refused with an
// error wrapping ErrInvalidConfig, and nothing is taken.
type Turn struct {
	Priority int    // WithPriorities: higher first, with aging
	Sequence int64  // WithSequenceOrder: ascending (keyedsem: per key)
	Group    string // WithFairShare: the fair-share group (a tenant)
}

// MaxPriority bounds Turn.Priority: a priority outside [-MaxPriority,
// MaxPriority] is refused (ErrInvalidConfig), so that a priority times its
// aging step cannot overflow the waiter's place in line.
const MaxPriority = 1 << 20
