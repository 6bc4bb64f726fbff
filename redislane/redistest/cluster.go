package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cluster is a running Redis Cluster of masters only, each a Server of
// this process (so Stop, StopAll and the parent-death signal end it as they
// end a single server).
type Cluster struct {
	Nodes []*Server // in slot order: Nodes[i] serves the i-th n-th of the slots
}

// StartCluster starts a Redis Cluster of n masters on free loopback ports,
// persistence off, the 16384 slots split evenly among them in the order of
// Nodes, and returns once every node says the cluster is ok and knows the
// n nodes, or after 30 s with an error (the servers started are stopped).
func StartCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest: a cluster of %d nodes", n)
	}
	c := &Cluster{}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	for range n {
		s, err := start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		if err != nil {
			return fail(err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, n)
	for i, s := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true, ContextTimeoutEnabled: true})
		defer clients[i].Close()
	}
	for i, node := range clients {
		if i > 0 {
			if err := clients[0].ClusterMeet(ctx, "127.0.0.1", fmt.Sprint(c.Nodes[i].Port)).Err(); err != nil {
				return fail(fmt.Errorf("redistest: CLUSTER MEET %s: %w", c.Nodes[i].Addr, err))
			}
		}
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fail(fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.Nodes[i].Addr, err))
		}
	}
	known := fmt.Sprintf("cluster_known_nodes:%d\r", n)
	for i, node := range clients {
		for {
			info, err := node.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, known) {
				break
			}
			if ctx.Err() != nil {
				return fail(fmt.Errorf("redistest: the cluster is not ok on %s after 30s: %v", c.Nodes[i].Addr, errors.Join(err, ctx.Err())))
			}
			time.Sleep(10 * time.Millisecond) // polling the nodes' gossip, which tells no one
		}
	}
	return c, nil
}

// Addrs returns the nodes' addresses, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Stop stops every node and removes their directories.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}

// MoveSlot moves slot from Nodes[src] to Nodes[dst] while it may be in use,
// as redis-cli --cluster reshard moves each slot: IMPORTING on dst,
// MIGRATING on src, MIGRATE of the slot's keys in batches, then the new
// owner set on dst, src and the other masters, in that order. Meanwhile a
// command on the slot's keys is redirected (ASK) or told to try again
// (TRYAGAIN) where some of its keys have moved and some not.
func (c *Cluster) MoveSlot(ctx context.Context, slot, src, dst int) error {
	clients := make([]*redis.Client, len(c.Nodes))
	for i, s := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true, ContextTimeoutEnabled: true})
		defer clients[i].Close()
	}
	srcID, err := clients[src].ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	dstID, err := clients[dst].ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	if err := clients[dst].Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return fmt.Errorf("redistest: SETSLOT IMPORTING: %w", err)
	}
	if err := clients[src].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return fmt.Errorf("redistest: SETSLOT MIGRATING: %w", err)
	}
	host, port, err := net.SplitHostPort(c.Nodes[dst].Addr)
	if err != nil {
		return err
	}
	for {
		keys, err := clients[src].ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		// NOKEY: the keys expired or were deleted since they were listed.
		if err := clients[src].Do(ctx, args...).Err(); err != nil && err.Error() != "NOKEY" {
			return fmt.Errorf("redistest: MIGRATE: %w", err)
		}
	}
	order := []int{dst, src}
	for i := range c.Nodes {
		if i != dst && i != src {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := clients[i].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
			return fmt.Errorf("redistest: SETSLOT NODE on %s: %w", c.Nodes[i].Addr, err)
		}
	}
	return nil
}
