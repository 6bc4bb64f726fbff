package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Calls is a go-redis hook that counts the commands a client sends: each
// command of a pipeline counts, and a script call is one command. Add it
// with client.AddHook(c); the zero value counts from zero. Its methods are
// safe for concurrent use.
type Calls struct {
	commands atomic.Int64
	evals    atomic.Int64
}

// Commands returns how many commands have been sent so far.
func (c *Calls) Commands() int64 { return c.commands.Load() }

// Evals returns how many of the commands sent so far were EVALSHA or EVAL.
func (c *Calls) Evals() int64 { return c.evals.Load() }

func (c *Calls) count(cmd redis.Cmder) {
	c.commands.Add(1)
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		c.evals.Add(1)
	}
}

// DialHook implements redis.Hook; it leaves dialling alone.
func (c *Calls) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: one command.
func (c *Calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: each command of the pipeline.
func (c *Calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
