// Package harness is the test and benchmark harness of the lanes module:
// [github.com/sessionlane/lanes/harness/modelcheck] drives the public
// packages against the reference models of internal/model,
// [github.com/sessionlane/lanes/harness/benchkit] is the benchmark
// plumbing (the peers measured side by side), and
// [github.com/sessionlane/lanes/harness/lanetest] has lanes that behave as
// other packages' do, for the tests of lanequeue and what builds on it. It
// carries no compatibility promise. The packages here import the public
// packages, never the other way round: internal/ is the layer the public
// packages build on, and its TestInternalImportsNoPublicPackage fails if
// anything there imports a package above it.
package harness
