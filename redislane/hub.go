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

// A hub is the one pub/sub subscription of a process to the wake channels of
// its lanes on one Redis client. It fans the messages out to the waiters by
// permit id. Pub/sub drops messages across reconnects, so every waiter also
// polls on a timer; a message only makes a handoff faster.
type hub struct {
	client redis.UniversalClient
	refs   int // guarded by hubs.mu: lanes using the hub

	mu       sync.Mutex // protects the fields below
	watchers map[string]chan<- string
	lanes    map[string]int         // channel -> lanes using it
	subbed   map[string]*subscribed // channels subscribed (or being subscribed)
	ps       *redis.PubSub          // nil until the first subscription
	closed   bool
	stop     chan struct{} // closed with the hub

	wg sync.WaitGroup // the receive loop and the Subscribe calls in flight

	delivered atomic.Int64 // messages handed to a watcher (for tests)
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
		h = &hub{
			client:   client,
			watchers: make(map[string]chan<- string),
			lanes:    make(map[string]int),
			subbed:   make(map[string]*subscribed),
			stop:     make(chan struct{}),
		}
		hubs.m[client] = h
	}
	h.refs++
	h.mu.Lock()
	h.lanes[channel]++
	h.mu.Unlock()
	return h
}

// leave counts one lane less on channel; the last lane of a channel
// unsubscribes from it (a call that ends by the deadline by), and the last
// lane of the hub closes the subscription and waits for the receive loop
// and the subscriptions in flight to end (each bounded by the margin of
// the lane that began it; the loop's ping by maxWait).
func (h *hub) leave(channel string, by time.Time) {
	h.mu.Lock()
	h.lanes[channel]--
	unsub := h.lanes[channel] == 0 && h.subbed[channel] != nil
	if h.lanes[channel] == 0 {
		delete(h.lanes, channel)
		delete(h.subbed, channel)
	}
	ps := h.ps
	h.mu.Unlock()

	hubs.mu.Lock()
	h.refs--
	last := h.refs == 0
	if last {
		delete(hubs.m, h.client)
	}
	hubs.mu.Unlock()
	if !last {
		if unsub && ps != nil {
			ctx, cancel := context.WithDeadline(context.Background(), by)
			_ = ps.Unsubscribe(ctx, channel)
			cancel()
		}
		return
	}
	h.mu.Lock()
	h.closed = true
	close(h.stop)
	ps = h.ps
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close() // fails the loop's receive; the loop sees closed and ends
	}
	h.wg.Wait()
}

// subscribed is a channel's subscription; ready is closed when Redis has
// confirmed it.
type subscribed struct {
	ready     chan struct{}
	confirmed bool
}

// confirmWait is how long the first watch of a channel waits, at most, for
// Redis to confirm the subscription. Tests lengthen it.
var confirmWait = maxWait

// watch routes the messages for id to ch (which must be buffered; a message
// that finds it full is dropped, the waiter's timer covers it). The first
// watch of a channel subscribes to it, in the background with a deadline of
// timeout, and waits, at most confirmWait, until Redis confirms, so that
// the first handoff is not lost. It stops waiting when ctx ends or done
// (the lane's Close) is closed: the caller then looks at them and leaves.
func (h *hub) watch(ctx context.Context, done <-chan struct{}, channel, id string, ch chan<- string, timeout time.Duration) {
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
		sub = &subscribed{ready: make(chan struct{})}
		h.subbed[channel] = sub
		if h.ps == nil {
			h.ps = h.client.Subscribe(context.Background())
			h.wg.Add(1)
			go h.loop(h.ps)
		}
		ps := h.ps
		h.wg.Add(1)
		h.mu.Unlock()
		// In the background: this may dial (up to the client's DialTimeout)
		// or wait for the receive loop's reconnection, and the waiter must
		// be free to leave meanwhile. On failure go-redis keeps the channel
		// and subscribes again when it reconnects.
		go func() {
			defer h.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_ = ps.Subscribe(ctx, channel)
			// If the channel's last lane left meanwhile, its Unsubscribe
			// may have gone first: take the subscription back. (A lane that
			// came back on the channel has its own subscribed.)
			h.mu.Lock()
			gone := h.subbed[channel] == nil
			h.mu.Unlock()
			if gone {
				_ = ps.Unsubscribe(ctx, channel)
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

func (h *hub) unwatch(id string) {
	h.mu.Lock()
	delete(h.watchers, id)
	h.mu.Unlock()
}

// receiveTimeout bounds a silent wait on the subscription; after it the
// loop pings, so that a dead connection is noticed and replaced.
const receiveTimeout = 5 * time.Second

// loop reads the subscription itself (rather than through go-redis's
// channel) so that a handoff reaches its waiter with one goroutine switch.
func (h *hub) loop(ps *redis.PubSub) {
	defer h.wg.Done()
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
			case <-h.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// go-redis replaces a broken connection on the next receive.
				pctx, cancel := context.WithTimeout(ctx, maxWait)
				_ = ps.Ping(pctx)
				cancel()
				continue
			}
			// Redis is unreachable; waiters poll meanwhile.
			backoff = nextBackoff(backoff)
			t := time.NewTimer(jitter(backoff))
			select {
			case <-t.C:
			case <-h.stop:
				t.Stop()
				return
			}
			continue
		}
		backoff, wait = 0, receiveTimeout
		m, ok := msg.(*redis.Message)
		if !ok {
			if sub, ok := msg.(*redis.Subscription); ok && sub.Kind == "subscribe" {
				h.mu.Lock()
				if s := h.subbed[sub.Channel]; s != nil && !s.confirmed {
					s.confirmed = true
					close(s.ready)
				}
				h.mu.Unlock()
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
