package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// This file holds every call the recipe makes on package lanequeue: the
// lanes, their orders, and the drain.

// lanes is the gateway's queue: a webhook takes a thread lane and a share
// of the agent runs (inbound); its model calls take the model lane
// (outbound, through lanehttp.Transport).
type lanes struct {
	q       *lanequeue.Queue[string]
	inbound lanequeue.LaneSet[string]
	model   lanequeue.LaneSet[string]
	limit   *adaptive.Controller
	// holdsRunOut reads the thread lane's count of reorder holds that ran
	// out (keyedsem's or, on Redis, redislane's Stats).
	holdsRunOut func() uint64
}

// newLanes makes the three lanes:
//   - "thread", keyed by thread id: one message of a thread at a time, in
//     the order of their numbers, holding a message whose predecessor has
//     not arrived for up to hold;
//   - "agents", global: at most agents runs at once, shared by weighted
//     fair share among groups, a tenant's users (weight weightUser) and a
//     tenant's cron jobs (weightCron): while both tenants' users and one
//     tenant's cron jobs wait, those cron jobs get 1 run in 17 and each
//     tenant's users 8; a group that asks for less than its share (the
//     small tenant's users, cron jobs a few a second) is served as it
//     comes, ahead of a busy group's backlog. Cron jobs in a lower
//     priority band instead would starve while the users keep the lane
//     full, or, once aged, hold back the users who come after them
//     (TestEngineAgedBandHoldsBackFairShare);
//   - "model", global: the calls in flight to the model API, a limit that
//     an AIMD controller moves between 1 and modelCeiling as the API
//     answers (lanehttp.Transport reports its 429s and pauses the lane for
//     their Retry-After).
//
// With a Redis client (a fleet of replicas behind a load balancer) the
// three lanes are the fleet's: a thread's messages keep their order
// whichever replica gets them (redislane.Keyed with the same order and
// hold); the agents lane is one for the fleet, agents runs at once in
// all, shared by the same groups and weights whichever replica a message
// came to (redislane.Weighted made WithFairShare: the order is decided in
// Redis); and the model API's limit is one for the fleet (redislane.Fleet,
// moved by the controller of the elected replica). Every replica must make
// them with the same settings. Size the agents lane to admit about what the
// model lane can serve: a larger one moves the queue to the model lane,
// which serves in arrival order whatever the tenant (README.md: 12 for the
// load driver's fleet, where 24 doubled the small tenant's users' p99).
//
// probeEvery spaces the controller's probes above the limit it found: one
// per this many calls at least (the controller's own default, once a 429
// has found the limit, is one per 300), each costing a 429 or two.
const probeEvery = 200

func newLanes(agents, modelCeiling int64, hold time.Duration, rc redis.UniversalClient, ropts ...redislane.Option) (*lanes, error) {
	q := lanequeue.New[string]()
	l := &lanes{q: q}
	var (
		err                  error
		thread, agent, model lanequeue.Lane[string]
		target               adaptive.Target
	)
	if rc == nil {
		k := keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(hold))
		l.holdsRunOut = func() uint64 { return k.Stats().HoldsRunOut }
		s := semaphore.New(modelCeiling)
		thread, agent = lanequeue.NewKeyedLane(k), lanequeue.NewGlobalLane[string](newAgents(agents))
		model, target = lanequeue.NewGlobalLane[string](s), s
	} else {
		var (
			k *redislane.Keyed
			a *redislane.Weighted
			f *redislane.Fleet
		)
		k, err = redislane.NewKeyed(rc, "chatgateway:thread", 1, append(slices.Clip(ropts), redislane.WithSequenceOrder(), redislane.WithReorderHold(hold))...)
		if err == nil {
			a, err = redislane.NewWeighted(rc, "chatgateway:agents", agents, append(slices.Clip(ropts), redislane.WithFairShare(agentsWeight))...)
			if err != nil {
				k.Close()
			}
		}
		if err == nil {
			f, err = redislane.NewFleet(rc, "chatgateway:model", modelCeiling, ropts...)
			if err != nil {
				k.Close()
				a.Close()
			}
		}
		if err != nil {
			q.Close()
			return nil, err
		}
		l.holdsRunOut = func() uint64 { return k.Stats().HoldsRunOut }
		thread = redislane.AsKeyedLane(k, func(s string) string { return s })
		agent = redislane.AsLane[string](a)
		model, target = redislane.AsLane[string](f.Weighted), f
	}
	// Each lane is the queue's once added, and closed with it; those that
	// an error leaves out are closed here.
	named := []struct {
		name string
		lane lanequeue.Lane[string]
	}{{"thread", thread}, {"agents", agent}, {"model", model}}
	added := 0
	for _, n := range named {
		if err = q.Add(n.name, n.lane); err != nil {
			break
		}
		added++
	}
	if err == nil {
		l.limit, err = adaptive.New(target, 1, modelCeiling, adaptive.WithMinWindow(probeEvery))
	}
	if err == nil {
		err = q.ObserveLane("model", l.limit)
	}
	if err == nil {
		l.inbound, err = q.Lanes("thread", "agents")
	}
	if err == nil {
		l.model, err = q.Lanes("model")
	}
	if err != nil {
		for _, n := range named[added:] {
			n.lane.Close()
		}
		q.Close()
		return nil, err
	}
	return l, nil
}

// The agents lane's fair-share weights: while they wait, a tenant's users
// get weightUser shares of the agent runs, and its cron jobs weightCron.
const (
	weightUser = 8
	weightCron = 1
)

// newAgents makes the agents lane of newLanes; opts are a test's.
func newAgents(agents int64, opts ...semaphore.Option) *semaphore.Weighted {
	return semaphore.New(agents, append([]semaphore.Option{semaphore.WithFairShare(agentsWeight)}, opts...)...)
}

// agentsTurn is the turn on the agents lane of a message of tenant and
// kind: the group of the tenant's users or of its cron jobs.
func agentsTurn(tenant, kind string) semaphore.AcquireOption {
	if kind == "cron" {
		return semaphore.Group(tenant + "/cron")
	}
	return semaphore.Group(tenant + "/user")
}

// agentsWeight is the weight of an agentsTurn group.
func agentsWeight(group string) int {
	if strings.HasSuffix(group, "/cron") {
		return weightCron
	}
	return weightUser
}

// drain refuses new webhooks and lets the admitted ones finish, their model
// calls included (they carry the webhook's ticket in their context).
func (l *lanes) drain(ctx context.Context) error { return l.q.Drain(ctx) }

// refusedByLanes says whether err is a lane's refusal of a closed or
// draining queue.
func refusedByLanes(err error) bool { return errors.Is(err, semaphore.ErrClosed) }
