// Package exporters holds what the metric exporters of lanes share: a
// [Source] of lane snapshots, adapters that make one of a
// [semaphore.Weighted] or a [keyedsem.Keyed] (a [lanequeue.Queue] is one
// already), and the figures both exporters report ([Lane], [Read]).
//
// The exporters themselves are its subpackages:
//
//   - [github.com/sessionlane/lanes/exporters/promlanes]: a Prometheus
//     collector;
//   - [github.com/sessionlane/lanes/exporters/otellanes]: OpenTelemetry
//     asynchronous instruments.
//
// Each lane is reported under its name, with its capacity, the permits in
// use, the callers waiting, the keys alive (keyed lanes), the counters of
// [semaphore.Counters], a keyed lane's reorder holds that ran out
// (keyedsem.WithReorderHold), and, for a lane made with
// semaphore.WithHistograms, keyedsem.WithHistograms or
// redislane.WithHistograms, the wait-time and hold-time histograms of
// [semaphore.Timings]. A [LimitSource] (for example [Controllers]) gives
// the state of the adaptive controllers that drive lanes' capacities: each
// exporter reports it beside the lanes (the limit, its bounds, its moves
// by reason and the last reason). The module is separate from the core,
// so that a program that uses lanes without these exporters never depends
// on Prometheus or OpenTelemetry.
//
// # Capacity and use
//
// In use ([Lane.InUse]) is the permits this instance holds now, over all
// keys; of a rate lane, which holds nothing, what its window counts now
// (the requests its limiter has not refilled, the tokens charged in the
// last minute; a fleet's rate lane reports 0, its count being in Redis). Every
// capacity the exporters report says what it is counted over, so that a
// ratio and a sum mean what they say (the figures are [Lane]'s methods;
// the exporters' names are in their package docs):
//
//   - capacity ([Lane.InstanceCapacity]) is on in use's footing, for a lane
//     whose budget is this instance's: a global lane's capacity, a rate
//     lane's burst, and a keyed lane's per-key capacity times its keys
//     alive (the permits its live keys have between them). So in use /
//     capacity is the lane's usage, between 0 and 1, and both add up across
//     a service's instances: sum each, then divide.
//   - key capacity ([Lane.KeyCapacity]) is one key's bound, the same for
//     every key of a keyed lane: aggregate it with max, never sum. (A key
//     at its bound is busy; a keyed lane with a per-key capacity of 1
//     whose live keys are all held has usage 1, which is the truth: each
//     live key is serialised, as it should be.)
//   - fleet capacity ([Lane.FleetCapacity]) is the budget that a fleet of
//     instances shares (a lane whose LaneStats.Fleet is set, as every lane
//     of package redislane's is, or that a [FleetSource] marks): every
//     instance reports the whole, so aggregate it across instances with
//     max, never sum, beside the instances' in use, which you sum. Such a
//     lane has no capacity of the first kind: the fleet's usage is the sum
//     of in use over the max of fleet capacity. A fleet's keyed lane has a
//     key capacity only: no instance knows the fleet's keys, so there is no
//     true figure to divide by (its keys gauge counts the keys with callers
//     of this instance waiting).
//
// # Closed
//
// A lane is reported closed (LaneStats.Closed; the exporters' closed
// gauge is 1) once it is closed, by its own Close or its queue's, and
// only then. A lane of capacity 0, such as a semaphore made so or resized
// to 0 to admit nothing for a while ([semaphore.Weighted.SetCapacity]), is
// open: it is reported with a capacity of 0, and the permits still held in
// it as in use (its usage, in use / capacity, has no value until its
// capacity grows).
//
// # Waits by group
//
// A fair lane (a global lane made semaphore.WithFairShare, or
// lanequeue.NewFairLane's) mixes its groups' waits in one histogram: a
// small tenant's waits are lost among a big one's. A [GroupWaits],
// fed by the queue's hooks ([GroupHooks]; each reported wait names its
// group, lanequeue.Event's Group), keeps them apart, in a bounded number
// of series per lane: the exporters report them with a group label
// beside the lane's own (promlanes.WithGroupWaits,
// otellanes.WithGroupWaits).
//
// Which groups have a series of their own: the first groups of a lane
// to wait, up to [TopGroups] (10 by default), take a series each and
// keep it for as long as they wait at least once per [GroupIdle] (10
// minutes by default); every other group's waits are summed under
// [OtherGroup], "other". So a lane has at most TopGroups+1 series
// however many tenants come, and a group never moves between its own
// series and "other" from one scrape to the next: a busy group, which
// waits all the time, keeps its series, and one that has gone quiet
// gives its series up, at a scrape, to the next group that waits. A
// series given up is not lost from the sums: its counts are added to
// "other" (a counter only grows), so that a lane's series always add up
// to the waits recorded for it. The choice is by arrival and idleness,
// not a ranking redone at each scrape: a ranking would move a group's
// waits between series as the counts changed, and a counter that moves
// down is read as a reset. A group named "other" is always counted
// under "other"; the default group ("") is reported as it is named.
//
// What is counted: the grants of the calls that queued, timed by the
// queue's hooks to about a millisecond. A call granted at once is in no
// group's series (the lane's own wait histogram counts it as a wait of
// 0), so a lane's group counts add up to its waited grants
// (LaneStats.Waited) of the calls made through the queue, not to its
// acquires (a call whose permits came free between the queue's try and
// its wait counts as a short wait here, and not in Waited). A lane is
// reported once a wait on it named a group other than "" (a global lane
// without groups has no such series).
//
// Cost: an exporter reads its source when it is scraped or collected, never
// on the lanes' hot paths; a keyed lane's snapshot walks its keys (see
// [keyedsem.Keyed.Stats]). [GroupHooks] costs a lock and a few adds per
// wait, on the waits only: a grant at once reaches no hook.
package exporters
