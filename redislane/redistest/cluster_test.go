package redistest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/redislane/redistest"
)

// A cluster of three masters serves every slot; MoveSlot moves a slot and
// its key to another master, which then serves it, and the others redirect
// there; Stop ends every node.
func TestClusterMoveSlot(t *testing.T) {
	c, err := redistest.StartCluster(3)
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	defer cc.Close()
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	slot, err := cc.ClusterKeySlot(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	src := int(slot) * 3 / 16384 // the slots are split evenly, in order
	dst := (src + 1) % 3
	if err := c.MoveSlot(ctx, int(slot), src, dst); err != nil {
		t.Fatal(err)
	}
	node := func(i int) *redis.Client {
		n := redis.NewClient(&redis.Options{Addr: c.Nodes[i].Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = n.Close() })
		return n
	}
	if v, err := node(dst).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("the new owner answers %q, %v; want the moved key", v, err)
	}
	if _, ok := redis.IsMovedError(node(src).Get(ctx, "k").Err()); !ok {
		t.Fatal("the old owner does not redirect with MOVED")
	}
	port := c.Nodes[0].Port
	c.Stop()
	if err := node(0).Ping(ctx).Err(); err == nil {
		t.Fatalf("the node on port %d still answers after Stop", port)
	}
}
