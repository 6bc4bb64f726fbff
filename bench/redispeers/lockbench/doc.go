// Package lockbench measures per-key distributed locks side by side on one
// redis-server: lanes' redislane.Keyed with a per-key capacity of 1,
// github.com/go-redsync/redsync/v4 and github.com/bsm/redislock.
//
// A run starts groups of contenders (each group is what one process of a
// fleet would be: its own go-redis client and its own lock instance), all on
// one key. Every contender loops: lock, hold for Config.Hold, unlock. It logs
// when each lock call started and returned and when the hold ended (on a
// clock that every process of the machine shares, so that the logs of
// several processes can be merged). From the merged logs, [Summarize]
// reports throughput, the p50 and p99 of the wait for the lock, the longest
// wait (counting the waits still going on when the run ends), the Redis
// commands sent per grant (counted by a go-redis hook on every client) and
// the most holders at once, computed by [MostInUse] (the oracle): for a
// lock it must never exceed 1.
//
// The peers are configured as a user who must wait for the lock would
// configure them: redsync with unlimited tries (it gives up after 32 by
// default), redislock with a retry strategy (it does not retry by default).
// See [Impls] for the exact settings.
package lockbench
