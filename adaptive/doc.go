// Package adaptive drives the capacity of a budget (a global lane's
// semaphore) between a floor and a ceiling from the outcomes of the work
// it admits, so that a lane in front of a model API finds the provider's
// real concurrency limit instead of a guess that is either too low (idle
// capacity) or too high (429s, retries, wasted tokens).
//
// [New] makes a [Controller] over a [Target] (a [semaphore.Weighted], or
// any budget with Capacity and SetCapacity). Work reports its [Outcome]:
// [Success], [Overload] (a 429 or a 503) or [Ignore] (says nothing about
// the limit), and how long it held its permit:
//
//   - [Controller.Do] takes the permits from the target, runs the work,
//     classifies its error ([Classify]: nil is a success, an error wrapping
//     [ErrOverload] an overload, anything else ignored; or
//     [WithClassifier]) and reports, timing from the grant to the return.
//   - A lane of package lanequeue: give the controller the semaphore of
//     the lane (the one given to NewGlobalLane) and pass the controller to
//     Queue.ObserveLane; Queue.Do and Ticket.Finish then report fn's error
//     and the time held, with no code at the call site.
//   - By hand: [Controller.Report](outcome, rtt), before releasing the
//     permit.
//
// Round trips: the controller grows the limit at most once per round
// trip, a window of max(limit, [WithMinWindow]) reports (ignored ones not
// counted): about the time each permit of a fully used lane takes to come
// back once. Once an overload has cut the limit, a round trip is also at
// least 300/max(1, (1-backoff)·limit/increase) reports, so that the
// growth from a cut back to the provider's limit spans 300 reports: the
// probes then cost about 0.3% of the calls whatever the provider's limit
// and latency (with the defaults the term matters below a limit of 30;
// a round trip of limit reports made it about 1/(0.1·limit²): 18% at 6).
// It lowers the limit at once on the first overload of work
// admitted since the last decrease, and that ends the round trip early: a
// refusal comes back fast, so waiting for the round trip's end would let
// every call admitted over the provider's limit meanwhile fail, many of
// them per slow success. A refusal of work admitted before the last
// decrease (its report's rtt reaches back past the decrease) saw the
// higher limit, was already acted on and is not counted: one burst of
// 429s cuts the limit once.
//
// Which algorithm:
//
//   - AIMD ([WithAIMD], the default: increase 1, backoff 0.9), for
//     providers that refuse rather than slow down. An overload multiplies
//     the limit by backoff; a round trip without one, during which the
//     lane was at least half used (by Little's law, the reported hold
//     times over the round trip's length), adds increase. It probes: it
//     rises to the provider's limit, takes a refusal, backs off, and
//     rises again: about one refusal per probe, and a probe per 300
//     reports at most (WithMinWindow(n) spaces the probes n reports apart
//     at least).
//   - Vegas ([WithVegas]), for providers that slow down before they refuse.
//     From a round trip's mean latency and a baseline (the lowest mean seen,
//     smoothed, rising very slowly to follow a provider that gets slower
//     for good) it estimates the share of the limit that queues inside the
//     provider,
//     1 - baseline/latency; it grows the limit while that share is under
//     alpha and shrinks it above beta, and backs off by 0.9 on overloads as
//     AIMD does. It keeps the limit under the refusals when the provider's
//     latency warns of them, at a lower latency; against a provider whose
//     latency stays flat it behaves as a faster-growing AIMD. It learns the
//     provider's own latency from round trips at a light load: start it
//     low ([WithInitial] near the floor) or where the provider is not yet
//     slow. Started in the slow region, it takes the slow latency for the
//     provider's own and, until a quieter spell shows it a lower one,
//     behaves as AIMD, probing into the refusals.
//
// In cmd/lanesim -provider (a simulated model API whose true limit steps
// and drifts, simulated time), both keep the goodput of the best fixed
// limit with a 429 rate of 0.3% (AIMD) and 0.05% (Vegas), against 67% and
// 94% for the fixed limit right on average and twice it; against true
// limits near 10 and calls of 20 ms to 2 s, AIMD's rate stays at 0.3-0.4%
// and Vegas's at 0.01-0.3% (docs/benchmarks-policies.md).
//
// The settle bound: after the provider's true limit steps to T (within
// [floor, ceiling]), with every round trip using the whole limit, AIMD with
// increase a and backoff b enters the band [min(T, floor(b(T+1))), T+a]
// within ceil((T-L)/a) round trips from a limit L below it, or
// ceil(ln(L/(T+a)) / ln(1/b)) from above it, plus one, and stays in the
// band (its sawtooth). Vegas, against a provider that refuses without
// slowing down, enters [min(T, floor(0.9(T+1))), floor(T+1+max(1,
// alpha(T+1)))] within min(T-L, ceil(ln(T/L)/ln(1+alpha))) round trips
// from below, the same number as AIMD with b = 0.9 from above, plus one.
// Once an overload has found a limit, a round trip may be longer than the
// limit (see Round trips above): one may then end in a growth just before
// the refusals of a step down come back, which adds a round trip and the
// cut that undoes it, so from above the bound is two more. The property
// tests check both bounds on random steps, counting the controller's round
// trips.
//
// Shrinking never preempts: a decrease calls the target's SetCapacity,
// and a semaphore then takes the permits from what is available, which may
// go negative: nothing is taken from holders, the lane admits nobody until
// they drain below the new capacity, and waiters whose request no longer
// fits fail as SetCapacity documents. Available + Held == Capacity holds
// throughout.
//
// A budget shared by a fleet (redislane.Fleet, a [Shared] target): run a
// controller on every instance; only the elected leader's controller moves
// the limit, the others take the fleet's limit at each decision, and a
// newly elected leader continues from the fleet's limit (see [Shared]).
// A cut counts from when the target shows it, not from the decision: the
// refusals of work admitted before the store wrote it are the ones the cut
// answers, so one overshoot is one cut.
// The leader hears the followers' overloads ([OverloadSharer]) and grows
// the limit only when the fleet used half of it ([UseSharer]); a Fleet is
// both. Controller.Do needs a target it can acquire from ([Acquirer]); a Fleet's
// permits are redislane's own, so report through a lanequeue lane
// (redislane.AsLane and Queue.ObserveLane) or by hand with Report.
//
// Stats: [Controller.Stats] gives the limit, why and when it last moved
// ([Reason]), and the moves by cause.
//
// Cost: a report is a few atomic adds with no lock and no allocation
// (about 10 ns; an overload also reads the clock); the report that ends a
// round trip, and a fresh overload, decide under the controller's lock and
// may call SetCapacity.
// Figures: bench_test.go.
//
// The zero Controller is not usable; a Controller must not be copied. All
// its methods are safe for concurrent use.
package adaptive
