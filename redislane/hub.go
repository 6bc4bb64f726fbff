package redislane

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A hub is the pub/sub subscription of a process to the wake channels of its
// lanes on one Redis client. It fans the messages out to the waiters by
// permit id. Pub/sub drops messages across reconnects, so every waiter also
// polls on a timer; a message only makes a hand-over faster.
//
// Where the server has sharded pub/sub (Redis 7), the lanes publish with
// SPUBLISH and the hub subscribes with SSUBSCRIBE, so that a Cluster
// delivers a message on the node of the lane's slot only, instead of
// broadcasting it to every node. A single node (or Sentinel) client takes
// all its channels on one connection. On a Cluster client, a shard
// channel can be subscribed only on the node of its slot, so each shard
// channel gets its own connection; classic channels share one (a Cluster
// broadcasts them). On a Ring client every channel lives on the shard of
// its hash tag, a server of its own, so each channel gets its own
// connection there.
//
// A Cluster moves slots (a reshard): the node that loses a slot drops its
// shard channels' subscribers, with an sunsubscribe each. The connection of
// such a channel is then replaced by one to the slot's node as the client's
// slot map says (see follow). A subscription that reaches a node that does
// not serve the slot (the map is stale, for a while after a move) is
// refused with MOVED, and is made again on the node that MOVED names. As a
// backstop for an sunsubscribe never heard, a shard channel's connection
// that was silent for receiveTimeout subscribes again, instead of a ping,
// on its node: a node that lost the slot answers MOVED.
type hub struct {
	client     redis.UniversalClient
	refs       int  // guarded by hubs.mu: lanes using the hub
	perChannel bool // a connection per shard channel
	ring       bool // a Ring client: a connection per channel, made with it
	mode       atomic.Int32

	mu       sync.Mutex // protects the fields below
	watchers map[string]chan<- string
	lanes    map[string]int         // channel -> lanes using it
	subbed   map[string]*subscribed // channels subscribed (or being subscribed)
	conns    map[string]*psConn     // by group (see group)
	closed   bool
	stop     chan struct{} // closed with the hub

	wg sync.WaitGroup // the receive loops and the Subscribe calls in flight

	delivered  atomic.Int64 // messages handed to a watcher (for tests)
	goroutines atomic.Int64 // receive loops and subscriptions running (for tests)
}

// Values of hub.mode: whether the server has sharded pub/sub.
const (
	modeUnknown int32 = iota
	modeSharded
	modeClassic
)

// A psConn is one pub/sub connection of a hub and its receive loop.
type psConn struct {
	// ps is set by the subscription on a Ring, before first is closed, and
	// replaced by the loop when the shard channel's slot moved (shard).
	mu    sync.Mutex
	ps    *redis.PubSub
	chans int           // channels on it; guarded by hub.mu
	stop  chan struct{} // closed when it is closed
	done  chan struct{} // closed when its loop has ended
	// shard is the connection's one channel where it is a shard channel on
	// a Cluster client, whose slot can move to another node; else "".
	shard string
	// first, if not nil, is closed when the subscription call of the
	// connection's one channel (a shard channel on a Cluster, any channel
	// on a Ring) has ended: its loop waits for it before it receives.
	first chan struct{}
}

var hubs struct {
	mu sync.Mutex
	m  map[redis.UniversalClient]*hub
}

// joinHub returns the hub of client, creating it, and counts one more lane
// using it, on channel. It starts nothing: the subscription waits for the
// first waiter.
func joinHub(client redis.UniversalClient, channel string) *hub {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if hubs.m == nil {
		hubs.m = make(map[redis.UniversalClient]*hub)
	}
	h := hubs.m[client]
	if h == nil {
		_, single := client.(*redis.Client)
		_, ring := client.(*redis.Ring)
		h = &hub{
			client:     client,
			perChannel: !single,
			ring:       ring,
			watchers:   make(map[string]chan<- string),
			lanes:      make(map[string]int),
			subbed:     make(map[string]*subscribed),
			conns:      make(map[string]*psConn),
			stop:       make(chan struct{}),
		}
		hubs.m[client] = h
	}
	h.refs++
	h.mu.Lock()
	h.lanes[channel]++
	h.mu.Unlock()
	return h
}

// knownSharded returns what sharded found, if it has asked already.
func (h *hub) knownSharded() (sharded, known bool) {
	switch h.mode.Load() {
	case modeSharded:
		return true, true
	case modeClassic:
		return false, true
	}
	return false, false
}

// sharded tells whether the server has sharded pub/sub, asking it (COMMAND
// INFO SPUBLISH, one call per client and process) the first time. Every
// instance of a lane on the same server comes to the same answer, so that
// publishers and subscribers agree.
func (h *hub) sharded(ctx context.Context) (bool, error) {
	switch h.mode.Load() {
	case modeSharded:
		return true, nil
	case modeClassic:
		return false, nil
	}
	v, err := h.client.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	var re redis.Error
	if err != nil && !errors.As(err, &re) {
		return false, err // not answered: ask again next time
	}
	// An error reply (a proxy or an ACL that does not pass COMMAND) is
	// taken as no: the classic commands work everywhere.
	has := err == nil && len(v) > 0 && v[0] != nil
	m := modeClassic
	if has {
		m = modeSharded
	}
	h.mode.CompareAndSwap(modeUnknown, m)
	return has, nil
}

// group names the connection that carries channel.
func (h *hub) group(channel string, sharded bool) string {
	if (sharded || h.ring) && h.perChannel {
		return "s:" + channel
	}
	return ""
}

// leave counts one lane less on channel. The last lane of a channel
// unsubscribes from it (a call that ends by the deadline by), or, if it was
// its connection's last channel, closes the connection and waits for its
// receive loop to end; either way it waits for the channel's subscription
// call in flight, if any. So Close joins every goroutine that its lane set
// off, also while other lanes keep the hub. The last lane of the hub closes
// every connection and waits for all receive loops and subscriptions. Each
// wait is bounded: a subscription by the margin of the lane that began it,
// a loop's ping by maxWait.
func (h *hub) leave(channel string, by time.Time) {
	h.mu.Lock()
	h.lanes[channel]--
	var gone, unsub *subscribed
	var closing *psConn
	if h.lanes[channel] == 0 {
		delete(h.lanes, channel)
		if s := h.subbed[channel]; s != nil {
			delete(h.subbed, channel)
			gone = s
			s.conn.chans--
			if s.conn.chans == 0 {
				// No channel left on it: its loop would only keep a
				// connection open for lanes that never wait.
				delete(h.conns, s.group)
				closing = s.conn
			} else {
				unsub = s
			}
		}
	}
	h.mu.Unlock()

	hubs.mu.Lock()
	h.refs--
	last := h.refs == 0
	if last {
		delete(hubs.m, h.client)
	}
	hubs.mu.Unlock()

	if closing != nil {
		closing.close()
	}
	if unsub != nil && !last {
		ctx, cancel := context.WithDeadline(context.Background(), by)
		unsub.unsubscribe(ctx, channel)
		cancel()
	}
	if gone != nil {
		<-gone.done // its subscription call, bounded by its deadline
	}
	if !last {
		return
	}
	h.mu.Lock()
	h.closed = true
	close(h.stop)
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
	h.wg.Wait()
}

// close closes the connection, which fails its loop's receive; the loop sees
// stop and ends.
func (pc *psConn) close() {
	close(pc.stop)
	if pc.first != nil {
		<-pc.first // its subscription call, bounded by its deadline; on a Ring it makes ps
	}
	_ = pc.pubsub().Close()
	<-pc.done
}

// pubsub returns the connection's subscription now.
func (pc *psConn) pubsub() *redis.PubSub {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.ps
}

// subscribed is a channel's subscription; ready is closed when Redis has
// confirmed it.
type subscribed struct {
	ready     chan struct{}
	done      chan struct{} // closed when the subscription call has ended
	confirmed bool
	sharded   bool
	group     string
	conn      *psConn
}

func (s *subscribed) unsubscribe(ctx context.Context, channel string) {
	if s.sharded {
		_ = s.conn.pubsub().SUnsubscribe(ctx, channel)
	} else {
		_ = s.conn.pubsub().Unsubscribe(ctx, channel)
	}
}

// confirmWait is how long the first watch of a channel waits, at most, for
// Redis to confirm the subscription. Tests lengthen it.
var confirmWait = maxWait

// watch routes the messages for id to ch (which must be buffered; a message
// that finds it full is dropped, the waiter's timer covers it). The first
// watch of a channel subscribes to it (with SSUBSCRIBE if sharded), in the
// background with a deadline of timeout, and waits, at most confirmWait,
// until Redis confirms, so that the first hand-over is not lost. It stops
// waiting when ctx ends or done (the lane's Close) is closed: the caller
// then looks at them and leaves.
func (h *hub) watch(ctx context.Context, done <-chan struct{}, channel string, sharded bool, id string, ch chan<- string, timeout time.Duration) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.watchers[id] = ch
	sub := h.subbed[channel]
	if sub != nil {
		h.mu.Unlock()
		select {
		case <-sub.ready:
			return
		default:
		}
	} else {
		g := h.group(channel, sharded)
		subDone := make(chan struct{})
		pc := h.conns[g]
		if pc == nil {
			pc = &psConn{
				stop: make(chan struct{}),
				done: make(chan struct{}),
			}
			if !h.ring { // a Ring's Subscribe needs the channel: the subscription makes it
				pc.ps = h.client.Subscribe(context.Background()) // no channel: no I/O
			}
			if g != "" {
				// A receive on a connection not yet dialed would dial a
				// random node of a Cluster, where the shard channel's
				// subscription is refused (MOVED): the subscription
				// dials it, to the node of the channel's slot.
				pc.first = subDone
				if _, ok := h.client.(*redis.ClusterClient); ok && sharded {
					pc.shard = channel
				}
			}
			h.conns[g] = pc
			h.wg.Add(1)
			h.goroutines.Add(1)
			go h.loop(pc)
		}
		pc.chans++
		sub = &subscribed{ready: make(chan struct{}), done: subDone, sharded: sharded, group: g, conn: pc}
		h.subbed[channel] = sub
		h.wg.Add(1)
		h.goroutines.Add(1)
		h.mu.Unlock()
		// In the background: this may dial or wait for the receive loop's
		// reconnection, and the waiter must be free to leave meanwhile. On
		// failure go-redis keeps the channel and subscribes again when it
		// reconnects.
		go func() {
			defer func() {
				h.goroutines.Add(-1)
				close(sub.done)
				h.wg.Done()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			switch {
			case h.ring:
				// The Ring's PubSub, on the channel's shard, subscribed
				// (or, on failure, to be on its next connection).
				var ps *redis.PubSub
				if sharded {
					ps = h.client.SSubscribe(ctx, channel)
				} else {
					ps = h.client.Subscribe(ctx, channel)
				}
				pc.mu.Lock()
				pc.ps = ps
				pc.mu.Unlock()
			case sharded:
				_ = pc.pubsub().SSubscribe(ctx, channel)
			default:
				_ = pc.pubsub().Subscribe(ctx, channel)
			}
			// If the channel's last lane left meanwhile, its Unsubscribe
			// may have gone first: take the subscription back. (A lane that
			// came back on the channel has its own subscribed.)
			h.mu.Lock()
			gone := h.subbed[channel] != sub
			h.mu.Unlock()
			if gone {
				sub.unsubscribe(ctx, channel)
			}
		}()
	}
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-sub.ready:
	case <-t.C: // Redis is slow or away; waiters poll meanwhile
	case <-ctx.Done():
	case <-done:
	case <-h.stop:
	}
}

// pause waits d, or until pc is closed; it returns false if pc was closed.
func (pc *psConn) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-pc.stop:
		return false
	}
}

// wants tells whether channel is still subscribed on pc, as far as the hub
// knows: not unsubscribed by the hub, nor moved to another connection.
func (h *hub) wants(pc *psConn, channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subbed[channel]
	return s != nil && s.conn == pc
}

// follow replaces ps, the subscription of pc's shard channel, with a new one
// and returns it, or it returns nil if pc was closed meanwhile. The new one
// is made on the master at addr if addr is not "" and the client knows a
// master there (a MOVED reply named it: the client's slot map may not say
// so yet, for a while), else on the node of the channel's slot as the
// client's map says. The new subscription dials in the call, bounded by
// maxWait; if that fails, go-redis subscribes on its next connection, which
// the next receive dials. Only pc's loop calls it.
func (h *hub) follow(pc *psConn, ps *redis.PubSub, addr string) *redis.PubSub {
	ctx, cancel := context.WithTimeout(context.Background(), maxWait)
	defer cancel()
	var next *redis.PubSub
	if node := h.masterAt(ctx, addr); node != nil {
		next = node.SSubscribe(ctx, pc.shard)
	} else {
		next = h.client.SSubscribe(ctx, pc.shard)
	}
	pc.mu.Lock()
	select {
	case <-pc.stop: // pc.close closes the subscription it found, ps
		pc.mu.Unlock()
		_ = next.Close()
		return nil
	default:
	}
	pc.ps = next
	pc.mu.Unlock()
	_ = ps.Close()
	return next
}

// masterAt returns the client of the Cluster master at addr, or nil if
// addr is "" or the client knows no master there.
func (h *hub) masterAt(ctx context.Context, addr string) *redis.Client {
	cc, ok := h.client.(*redis.ClusterClient)
	if !ok || addr == "" {
		return nil
	}
	var mu sync.Mutex
	var found *redis.Client
	_ = cc.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		if node.Options().Addr == addr {
			mu.Lock()
			found = node
			mu.Unlock()
		}
		return nil
	})
	return found
}

func (h *hub) unwatch(id string) {
	h.mu.Lock()
	delete(h.watchers, id)
	h.mu.Unlock()
}

// receiveTimeout bounds a silent wait on the subscription; after it the
// loop pings (a shard channel's connection subscribes again), so that a
// dead connection is noticed and replaced. Tests shorten it.
var receiveTimeout = 5 * time.Second

// followSunsubscribe is whether a loop follows a shard channel's slot when
// its node says sunsubscribe. Tests turn it off to see the backstop alone.
var followSunsubscribe = true

// loop reads the subscription itself (rather than through go-redis's
// channel) so that a hand-over reaches its waiter with one goroutine switch.
func (h *hub) loop(pc *psConn) {
	defer func() {
		h.goroutines.Add(-1)
		close(pc.done)
		h.wg.Done()
	}()
	if pc.first != nil {
		select {
		case <-pc.first:
		case <-pc.stop:
			return
		}
	}
	ps := pc.pubsub()
	ctx := context.Background()
	backoff := time.Duration(0)
	// A receive with no connection dials one (and greets Redis) under the
	// subscription's lock, which Close needs: that happens at the start and
	// after an error, and is bounded by maxWait there. A receive on a
	// working connection waits up to receiveTimeout without the lock.
	wait := maxWait
	for {
		rctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := ps.ReceiveTimeout(rctx, wait)
		cancel()
		if err != nil {
			wait = maxWait
			select {
			case <-pc.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// go-redis replaces a broken connection on the next receive.
				// A shard channel's connection subscribes again instead of a
				// ping: its node answers MOVED if it lost the slot.
				pctx, cancel := context.WithTimeout(ctx, maxWait)
				if pc.shard != "" {
					_ = ps.SSubscribe(pctx, pc.shard)
				} else {
					_ = ps.Ping(pctx)
				}
				cancel()
				continue
			}
			// Redis is unreachable, or (MOVED) the subscription went to a
			// node that does not serve the shard channel's slot: the
			// client's slot map is stale. Waiters poll meanwhile.
			backoff = nextBackoff(backoff)
			if !pc.pause(jitter(backoff)) {
				return
			}
			if pc.shard != "" {
				// Subscribe again: on the node that MOVED names, else where
				// the client's slot map says now (a master failed over).
				addr, _ := redis.IsMovedError(err)
				if ps = h.follow(pc, ps, addr); ps == nil {
					return
				}
			}
			continue
		}
		backoff, wait = 0, receiveTimeout
		m, ok := msg.(*redis.Message)
		if !ok {
			sub, ok := msg.(*redis.Subscription)
			if !ok {
				continue
			}
			switch sub.Kind {
			case "subscribe", "ssubscribe":
				h.mu.Lock()
				if s := h.subbed[sub.Channel]; s != nil && s.conn == pc && !s.confirmed {
					s.confirmed = true
					close(s.ready)
				}
				h.mu.Unlock()
			case "sunsubscribe":
				// The node lost the channel's slot (a reshard) and dropped
				// the subscription, if the hub still wants it: follow the
				// slot.
				if !followSunsubscribe || sub.Channel != pc.shard || !h.wants(pc, sub.Channel) {
					continue
				}
				if ps = h.follow(pc, ps, ""); ps == nil {
					return
				}
				wait = maxWait // the new subscription may have to dial
			}
			continue
		}
		id, fence, ok := strings.Cut(m.Payload, " ")
		if !ok {
			continue
		}
		h.mu.Lock()
		ch := h.watchers[id]
		h.mu.Unlock()
		if ch != nil {
			select {
			case ch <- fence:
				h.delivered.Add(1)
			default:
			}
		}
	}
}
