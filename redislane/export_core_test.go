package redislane

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Delivered returns how many pub/sub messages the hub of s's client has
// handed to a waiter of this process.
func Delivered(s *Weighted) int64 { return s.c.hub.delivered.Load() }

// HubGoroutines returns how many goroutines the pub/sub hub of s's client
// runs now (receive loops and subscriptions in flight); it reads the hub s
// joined, also after Close.
func HubGoroutines(s *Weighted) int64 { return s.c.hub.goroutines.Load() }

// HubConns returns how many pub/sub connections the hub of s's client
// holds now.
func HubConns(s *Weighted) int {
	h := s.c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// ScriptOf names the lane's script that cmd runs ("acquire", "release",
// "refresh", "fleet"), or returns "" for any other command.
func ScriptOf(cmd redis.Cmder) string {
	a := cmd.Args()
	if len(a) < 2 {
		return ""
	}
	s, _ := a[1].(string)
	for _, sc := range []struct {
		name string
		src  string
		sc   *redis.Script
	}{
		{"acquire", acquireSrc, acquireScript},
		{"release", releaseSrc, releaseScript},
		{"refresh", refreshSrc, refreshScript},
		{"fleet", fleetSrc, fleetScript},
	} {
		switch cmd.Name() {
		case "evalsha":
			if s == sc.sc.Hash() {
				return sc.name
			}
		case "eval":
			if s == sc.src {
				return sc.name
			}
		}
	}
	return ""
}

// FleetArgs are the arguments of one fleet script call made by FleetCall.
type FleetArgs struct {
	ID                string
	Limit, LTerm      int64 // the caller's last read and the term it was written in
	Seen              int64 // the highest term the caller saw
	Candidate, Set    bool
	Value, ValueTerm  int64
	Lease, Quarantine time.Duration
}

// FleetCall runs the fleet script of lane name once, as an instance of a
// Fleet would, and returns its reply: status, term, limit, written, lterm,
// and the overloads the followers shared.
func FleetCall(ctx context.Context, rc redis.UniversalClient, name string, a FleetArgs) ([]int64, error) {
	p := "{lanes:" + name + "}"
	return fleetScript.Run(ctx, rc,
		[]string{p + ":meta", p + ":leader", p + ":g:h", p + ":g:q", p + ":g:x", p + ":g:d"},
		a.ID, a.Limit, "fleet", ms(a.Lease), ms(a.Quarantine), p+":wake", "PUBLISH",
		flag(a.Candidate), ms(3*a.Lease), flag(a.Set), a.Value, a.ValueTerm, 0, a.Seen, a.LTerm, 0, 0,
	).Int64Slice()
}

// TryAcquireCall runs the acquire script of fleet lane name once in try
// mode, as a Fleet's TryAcquire would with the given last read, and
// returns its reply.
func TryAcquireCall(ctx context.Context, rc redis.UniversalClient, name, id string, limit, lterm int64, lease, quarantine time.Duration) ([]int64, error) {
	p := "{lanes:" + name + "}"
	return acquireScript.Run(ctx, rc,
		[]string{p + ":meta", p + ":g:h", p + ":g:q", p + ":g:x", p + ":g:d"},
		id, 1, limit, "fleet", ms(lease), ms(quarantine), 1, p+":wake", "PUBLISH", lterm,
	).Int64Slice()
}
