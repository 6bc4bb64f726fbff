// Command chatgateway is the recipe of a chat gateway built from the lanes
// alone: Slack-like webhooks (a JSON body with a tenant, a thread id, the
// message's number and its kind, user or cron) served in each thread's
// order, cron jobs behind users and a big tenant beside small ones on one
// shared lane of agent runs, an upstream model API called through
// lanehttp.Transport (its 429s and Retry-After obeyed by every caller, its
// hidden limit found by an adaptive controller), and a graceful shutdown
// that lets every admitted webhook finish.
//
//	go run ./examples/chatgateway -load 30s   # the load driver, in one process; prints what it measured
//	go run ./examples/chatgateway             # serve webhooks on -addr, a model API stub in-process
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
)

func main() {
	loadFor := flag.Duration("load", 0, "run the load driver for this long (the big tenant's phase), print what it measured, and exit")
	seed := flag.Uint64("seed", 1, "the load driver's random seed")
	step := flag.Duration("priority-step", time.Second, "a cron job that has waited this long on the agents lane counts as a user's message")
	addr := flag.String("addr", "localhost:8080", "serve webhooks on this address (without -load)")
	flag.Parse()

	if *loadFor > 0 {
		lo := defaultLoad(*loadFor)
		lo.Seed, lo.PriorityStep = *seed, *step
		r, err := run(lo)
		if err != nil {
			log.Fatal(err)
		}
		r.print(os.Stdout)
		return
	}
	if err := serve(*addr, *step); err != nil {
		log.Fatal(err)
	}
}

// serve runs the gateway on addr until SIGINT or SIGTERM, then drains it.
func serve(addr string, step time.Duration) error {
	lo := defaultLoad(0)
	lo.PriorityStep = step
	model := httptest.NewServer(newUpstream(lo.ModelLimit, lo.ModelWork, lo.RetryAfter, 1))
	defer model.Close()
	g, err := newGateway(config{
		Agents: lo.Agents, ModelCeiling: lo.ModelCeiling, Hold: lo.Hold, PriorityStep: lo.PriorityStep,
		ModelURL: model.URL + "/v1/messages", ModelBase: model.Client().Transport,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: g.handler}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	fmt.Printf("chatgateway: POST webhooks to http://%s/ (e.g. {\"tenant\":\"acme\",\"thread\":\"t1\",\"n\":1,\"kind\":\"user\",\"text\":\"hi\"})\n", addr)
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
