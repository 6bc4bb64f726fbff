package scenario

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// Usage is the truth about the lanes of UsageFleet: for each lane, the
// permits in use and the capacity they are taken from, over the three
// instances or of one instance.
type Usage struct {
	InUse, Capacity int64
}

// FleetLane is the name of the lane that UsageFleet's instances share.
const FleetLane = "model"

// UsageFleet returns three instances' sources, as three replicas of a
// service would export them, and the true usage of each lane, per
// instance and over the fleet. Each instance has:
//
//   - "thread", a keyed lane of a queue, per-key capacity 2, with 160 keys
//     held: on instance i, 100 keys hold 1 permit and 60 keys hold 2 (220
//     of the 320 permits of its live keys), plus i more keys holding 1;
//   - "local", a global lane of capacity 48 of which 30+i permits are held;
//   - FleetLane, a global lane whose budget of 48 a fleet of the three
//     instances shares (a redislane.Fleet, say), reported as redislane
//     reports it (Kind Global, Capacity the fleet's, Held the instance's
//     own: 10, 12 and 5), by a source whose FleetLanes method names it
//     (exporters.FleetSource, declared here by its method so that this
//     scenario does not depend on it).
//
// stop releases every permit and closes the queues; call it before the
// test ends.
func UsageFleet(t testing.TB) (instances [3]Source, perInstance [3]map[string]Usage, fleet map[string]Usage, stop func()) {
	t.Helper()
	own := [3]int64{10, 12, 5}
	return usage(t, func(i int, q *lanequeue.Queue[string]) (Source, func(), func()) {
		shared := sourceFunc(func() []lanequeue.LaneStats {
			return []lanequeue.LaneStats{{Name: FleetLane, Kind: lanequeue.Global, Capacity: 48, Held: own[i],
				Counters: semaphore.Counters{Acquired: uint64(own[i])}}}
		})
		return join{q, fleetLanes{shared}}, func() {}, func() {}
	}, own)
}

// UsageRedis is UsageFleet with a real fleet: FleetLane is a
// redislane.Weighted of capacity 48 on a redis-server of the test's own,
// added to each instance's queue with redislane.AsLane, through a client
// of the instance's own, made redislane.WithHistograms, and its permits
// are held for real (10, 12 and 5: one grant each, not yet released).
// Nothing marks it: the lane's snapshot says it is a fleet's. Without
// redis-server the test is skipped, unless CI=true, where it fails.
func UsageRedis(t testing.TB) (instances [3]Source, perInstance [3]map[string]Usage, fleet map[string]Usage, stop func()) {
	t.Helper()
	srv, err := redistest.Start()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Redis usage test needs a real redis-server and CI=true: %v", err)
		}
		t.Skipf("skipping: cannot start redis-server: %v", err)
	}
	t.Cleanup(srv.Stop) // also when the scenario fails half-built
	own := [3]int64{10, 12, 5}
	return usage(t, func(i int, q *lanequeue.Queue[string]) (Source, func(), func()) {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true, ContextTimeoutEnabled: true})
		w, err := redislane.NewWeighted(client, FleetLane, 48, redislane.WithQuarantine(0), redislane.WithHistograms())
		must(t, err)
		must(t, q.Add(FleetLane, redislane.AsLane[string](w)))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := w.Acquire(ctx, own[i])
		must(t, err)
		return q, func() { p.Release() }, func() { _ = client.Close() }
	}, own)
}

// usage builds UsageFleet's instances, with fleetLane adding FleetLane to
// instance i's queue q (or beside it) and returning the instance's
// source, what to do before q is closed and what to do after.
func usage(t testing.TB, fleetLane func(i int, q *lanequeue.Queue[string]) (src Source, release, after func()), own [3]int64) (instances [3]Source, perInstance [3]map[string]Usage, fleet map[string]Usage, stop func()) {
	t.Helper()
	ctx := context.Background()
	var permits []semaphore.Permit
	var queues []*lanequeue.Queue[string]
	var release, after []func()
	fleet = map[string]Usage{}
	for i := range instances {
		q := lanequeue.New[string]()
		queues = append(queues, q)
		k := keyedsem.New[string](keyedsem.WithPerKeyCapacity(2))
		g := semaphore.New(48)
		must(t, q.Add("thread", lanequeue.NewKeyedLane(k)))
		must(t, q.Add("local", lanequeue.NewGlobalLane[string](g)))
		keys := 160 + i
		for j := range keys {
			n := int64(1)
			if j >= 100 && j < 160 {
				n = 2
			}
			p, err := k.Acquire(ctx, fmt.Sprint("thread-", j), semaphore.Weight(n))
			must(t, err)
			permits = append(permits, p)
		}
		p, err := g.Acquire(ctx, int64(30+i))
		must(t, err)
		permits = append(permits, p)

		src, rel, aft := fleetLane(i, q)
		release, after = append(release, rel), append(after, aft)
		instances[i] = src
		perInstance[i] = map[string]Usage{
			"thread":  {InUse: 220 + int64(i), Capacity: 2 * int64(keys)},
			"local":   {InUse: 30 + int64(i), Capacity: 48},
			FleetLane: {InUse: own[i], Capacity: 48},
		}
		for _, name := range []string{"thread", "local"} {
			u := fleet[name]
			u.InUse += perInstance[i][name].InUse
			u.Capacity += perInstance[i][name].Capacity
			fleet[name] = u
		}
	}
	fleet[FleetLane] = Usage{InUse: own[0] + own[1] + own[2], Capacity: 48}
	return instances, perInstance, fleet, func() {
		for _, p := range permits {
			p.Release()
		}
		for i, q := range queues {
			release[i]()
			q.Close()
			after[i]()
		}
	}
}

// Source is exporters.Source, declared again so that UsageFleet can name it
// without importing the package under test.
type Source interface {
	Stats() []lanequeue.LaneStats
}

type sourceFunc func() []lanequeue.LaneStats

func (f sourceFunc) Stats() []lanequeue.LaneStats { return f() }

// fleetLanes marks every lane of its source as a fleet's.
type fleetLanes struct{ Source }

func (f fleetLanes) FleetLanes() []string {
	var names []string
	for _, st := range f.Stats() {
		names = append(names, st.Name)
	}
	return names
}

// join is a source of a queue's lanes and a fleet's, which names the
// fleet's lanes.
type join struct {
	q     *lanequeue.Queue[string]
	fleet fleetLanes
}

func (j join) Stats() []lanequeue.LaneStats { return append(j.q.Stats(), j.fleet.Stats()...) }

func (j join) FleetLanes() []string { return j.fleet.FleetLanes() }
