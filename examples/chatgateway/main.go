// Command chatgateway is the recipe of a chat gateway built from the lanes
// alone: Slack-like webhooks (a JSON body with a tenant, a thread id, the
// message's number and its kind, user or cron) served in each thread's
// order, users and cron jobs of a big tenant and of small ones sharing one
// lane of agent runs by weight, an upstream model API called through
// lanehttp.Transport (its 429s and Retry-After obeyed by every caller, its
// hidden limit found by an adaptive controller), and a graceful shutdown
// that lets every admitted webhook finish.
//
//	go run . -load 30s                                       # the load driver, in one process; prints what it measured
//	go run . -load 30s -replicas 3 -redis :6379 -agents 12   # three replicas in turn, sharing the three lanes on Redis
//	go run .                                                 # serve webhooks (and /metrics) on -addr, a model API stub in-process
//	go run . -redis :6379 -addr :8081                        # one replica of a fleet (run several behind a load balancer,
//	                                                         # each given the same -agents; each serves its own model API
//	                                                         # stub here, so point them at one real provider to share its limit)
//
// (from this directory: the recipe is a module of its own, so that Redis's
// and Prometheus's clients stay out of the core's requirements.)
//
// The recipe is gateway.go and lanes.go; upstream.go (the model API's
// stub) and driver.go (the traffic and its measures) are the scenario.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	loadFor := flag.Duration("load", 0, "run the load driver for this long (the big tenant's phase), print what it measured, and exit")
	seed := flag.Uint64("seed", 1, "the load driver's random seed")
	agents := flag.Int64("agents", defaultLoad(0).Agents, "agent runs at once: the gateway's, or with -redis the fleet's (every replica must be given the same)")
	addr := flag.String("addr", "localhost:8080", "serve webhooks on this address (without -load)")
	replicas := flag.Int("replicas", 1, "with -load: how many gateways the webhooks go to in turn (above 1 needs -redis)")
	redisAddr := flag.String("redis", "", "share the thread, agents and model lanes with every replica on the Redis at this address")
	flag.Parse()

	if *loadFor > 0 {
		lo := defaultLoad(*loadFor)
		lo.Seed, lo.Agents, lo.Replicas, lo.RedisAddr = *seed, *agents, *replicas, *redisAddr
		r, err := run(lo)
		if err != nil {
			log.Fatal(err)
		}
		r.print(os.Stdout)
		if len(r.misses()) > 0 {
			os.Exit(1)
		}
		return
	}
	if err := serve(*addr, *agents, *redisAddr); err != nil {
		log.Fatal(err)
	}
}

// serve runs the gateway on addr until SIGINT or SIGTERM, then drains it;
// with redisAddr, as one replica of a fleet sharing that Redis.
func serve(addr string, agents int64, redisAddr string) error {
	lo := defaultLoad(0)
	lo.Agents = agents
	model := httptest.NewServer(newUpstream(lo.ModelLimit, lo.ModelWork, lo.RetryAfter, 1))
	defer model.Close()
	cfg := config{
		Agents: lo.Agents, ModelCeiling: lo.ModelCeiling, Hold: lo.Hold,
		ModelURL: model.URL + "/v1/messages", ModelBase: model.Client().Transport,
	}
	if redisAddr != "" {
		rc := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
		defer rc.Close()
		cfg.Redis = rc
	}
	g, err := newGateway(cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: g.handler}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	fmt.Printf("chatgateway: POST webhooks to http://%s/ (e.g. {\"tenant\":\"acme\",\"thread\":\"t1\",\"n\":1,\"kind\":\"user\",\"text\":\"hi\"}); metrics on /metrics\n", addr)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.shutdown(ctx, srv); err != nil {
		return err
	}
	fmt.Println("chatgateway: drained: every webhook admitted was answered")
	return nil
}
