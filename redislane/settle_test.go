package redislane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// A waiter behind the head that its goroutine has not run yet leaves the
// outcome of one call unread when the head's next call carries its request
// again (the head was queued in Redis, so neither call granted it). The
// settle of the next call must not wait for the waiter to read, holding
// the lane's lock, and the grant that comes after must reach it.
func TestSettleDoesNotWaitForAnUnreadOutcome(t *testing.T) {
	r := testkit.Within(t, 10*time.Second, "the settles of three calls while the waiter read none of their outcomes (a settle that waits holds the lane's lock)", redislane.SettleUnread())
	assert.True(t, r[0], "the waiter reads the grant")
	assert.False(t, r[1], "no outcome is left behind the grant")
}

// Ids are unique across the goroutines of a process (a number each) and
// across processes (a random prefix each, drawn at start: see newID).
func TestIDsAreUnique(t *testing.T) {
	const goroutines, each = 8, 5000
	ids := make(chan []string, goroutines)
	for range goroutines {
		go func() {
			s := make([]string, each)
			for i := range s {
				s[i] = redislane.NewID()
			}
			ids <- s
		}()
	}
	seen := make(map[string]bool, goroutines*each)
	for range goroutines {
		for _, id := range testkit.Recv(t, ids, "a goroutine's ids") {
			if seen[id] {
				t.Fatalf("id %q made twice", id)
			}
			seen[id] = true
		}
	}
}

// A waiter behind the head whose turn came (the head left) while a call
// carried its request is told of the call's end too; if it read neither
// message, the outcome that takes the nudge's place must still tell it that
// its turn came, or it would wait for a head that never calls again.
func TestTurnSurvivesAnUnreadOutcome(t *testing.T) {
	turn := testkit.Within(t, 10*time.Second, "the turn and the outcome of one call, both unread", redislane.TurnUnread())
	assert.True(t, turn, "the waiter's turn is lost: the outcome that took its nudge's place does not tell it")
}
