// Package call holds the per-call options of every lanes package: one value
// type, built by the constructors of package semaphore (Priority, Group,
// Sequence, Weight) and lanequeue (LaneWeight), and read here into a Turn
// and a weight. It imports no package of the module, so that each public
// package can alias its Option without an import cycle.
package call

// Kind is what an Option sets.
type Kind uint8

// The kinds of Option.
const (
	KindNone     Kind = iota // the zero Option: sets nothing
	KindPriority             // N: the priority
	KindGroup                // Lane: the fair-share group
	KindSequence             // N: the sequence number
	KindWeight               // N: the weight on every lane; with Lane, on that lane only
	kindLenient              // the caller drops what a lane does not order by; see Lenient
)

// Option is one per-call option: a small value, so that options passed to
// a variadic parameter cost no allocation.
type Option struct {
	lane string // KindGroup: the group; KindWeight: the lane ("" for every lane)
	n    int64  // the number the option carries
	kind Kind
}

// Make returns the Option of kind k carrying lane and n.
func Make(k Kind, lane string, n int64) Option { return Option{lane: lane, n: n, kind: k} }

// KindOf, LaneOf and NOf return what o carries: functions, not methods, so
// that the public packages' alias of Option shows users no method.
func KindOf(o Option) Kind { return o.kind }

// LaneOf returns the group of a KindGroup option, the lane of a KindWeight
// one.
func LaneOf(o Option) string { return o.lane }

// NOf returns the number o carries.
func NOf(o Option) int64 { return o.n }

// Lenient is the option that a caller handing one set of options to many
// lanes (package lanequeue) adds, so that each lane drops a field it has
// no order for instead of refusing it. Users cannot build it.
var Lenient = Option{kind: kindLenient}

// MaxPriority bounds a priority: outside [-MaxPriority, MaxPriority] it is
// refused. A million classes are far more than a scheduler tells apart; the
// bound keeps a waiter's place in line within 64 bits whatever the aging
// step.
const MaxPriority = 1_000_000

// Turn is where a caller joins a line, read from its options: each field
// is ordered by only the lanes built for it. The zero Turn asks for nothing.
type Turn struct {
	Priority int
	Sequence int64
	Group    string
}

// Call is what a call's options say: its turn, its weight and whether it
// is lenient.
type Call struct {
	Turn
	Weight    int64 // the weight on every lane, if WeightSet
	WeightSet bool
	// LaneWeight says that an option set the weight of one lane, which
	// only a caller that knows its lanes by name (lanequeue) can honour.
	LaneWeight bool
	Lenient    bool
}

// Bad is why Read refused a call's options.
type Bad uint8

// The refusals of Read.
const (
	BadNone     Bad = iota
	BadPriority     // a priority out of [-MaxPriority, MaxPriority]
)

// Read folds opts into a Call; of options of one kind the last counts. A
// weight for one lane (KindWeight with a lane) is left to the caller that
// knows its lanes (LaneWeight says there was one). It refuses a priority
// out of range (the last one given), and says so; the caller returns its
// own static error, so that a refusal allocates nothing.
func Read(opts []Option) (Call, Bad) {
	var c Call
	bad := c.Fold(opts)
	return c, bad
}

// Fold is Read into c, which must be the zero Call: on a refusal c is
// left zero. A hot caller folds into its own variable, since the Call
// that Read returns, copied out and back, cost an uncontended Acquire
// with one option some 30 ns (docs/internals.md, "call: Fold").
func (c *Call) Fold(opts []Option) Bad {
	var prio int64
	for i := range opts {
		o := &opts[i]
		switch o.kind {
		case KindPriority:
			prio = o.n
		case KindGroup:
			c.Group = o.lane
		case KindSequence:
			c.Sequence = o.n
		case KindWeight:
			if o.lane == "" {
				c.Weight, c.WeightSet = o.n, true
			} else {
				c.LaneWeight = true
			}
		case kindLenient:
			c.Lenient = true
		}
	}
	if prio > MaxPriority || prio < -MaxPriority {
		*c = Call{}
		return BadPriority
	}
	c.Priority = int(prio)
	return BadNone
}

// FairShare is set by package semaphore to its func(*semaphore.Weighted)
// bool, which reports whether a semaphore was made WithFairShare; package
// lanequeue's NewFairLane, which refuses a semaphore without it (a fair
// lane over one would serve first come, first served), asserts it to that
// type. It is an any because this package may not import semaphore, and a
// method of Weighted would be one more for its users to read.
var FairShare any

// Settles is set by package lanequeue to a function of a
// *lanequeue.Queue[K] of any K and a lane's name, which reports whether
// Ticket.Settle can settle that lane (a lane of tokens: lanequeue's
// NewTokenLane, redislane's AsRateLane), so that package lanehttp refuses
// a Transport whose Usage could never settle its TokensLane when it is
// made, not at every answer. It is a variable here, not a method of Queue,
// for the reason FairShare is.
var Settles func(q any, lane string) bool
