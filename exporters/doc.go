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
// In use is the permits this instance holds now, over all keys. Every
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
// Cost: an exporter reads its source when it is scraped or collected, never
// on the lanes' hot paths; a keyed lane's snapshot walks its keys (see
// [keyedsem.Keyed.Stats]).
package exporters
