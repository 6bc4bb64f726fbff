# lanes: build, test, benchmark and fuzz targets. `make test` is what CI runs; `make check` is
# the quick look while you work (the core module only: gofmt, vet, race tests; no stress, 386,
# Redis or staticcheck).
#
# Nested modules (bench/, redislane/, bench/redispeers/, exporters/, examples/chatgateway/) have their own go.mod so their
# dependencies never enter the core's requirements; every target visits them.

GO          ?= go
MODULES     := . $(wildcard bench redislane bench/redispeers exporters examples/chatgateway)
STRESS      ?= 10
FUZZTIME    ?= 30s
BENCHCOUNT  ?= 10
BENCHTIME   ?= 1s
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all check test fmtcheck vet unit stress test386 lint staticcheck bench bench-report bench-redis fuzz lanesim clean

all: lint test

## check: the quick check while you work: gofmt, vet and the race-enabled tests of the core module
check: fmtcheck
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	@echo "make check: PASS (gofmt, vet, race tests of the core module; make test runs the rest)"

## test: gofmt, vet, race-enabled tests of every module, a stress pass, 386 and staticcheck
test: fmtcheck vet unit stress test386 staticcheck
	@echo "make test: PASS (gofmt, vet, race tests of $(words $(MODULES)) modules, stress x$(STRESS), 386, staticcheck)"

## fmtcheck: every tracked Go file is gofmt-clean
fmtcheck:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@for m in $(MODULES); do echo "== go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done

unit:
	@for m in $(MODULES); do echo "== go test -race ($$m)"; (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; done

## stress: the concurrency tests again, many times, under the race detector
stress:
	$(GO) test -race -count=$(STRESS) -run 'Stress|Race|Exclusion|Deadlock' ./semaphore/ ./keyedsem/ ./lanequeue/

## test386: the core's tests built for 386 (a misaligned 64-bit atomic panics only at run time), run
## natively where the kernel can and under qemu-i386 where it cannot; the first line says which.
## The commands (cmd/...) are built for 386 but not run there: they hold no layout of their own
## (typed atomics only), and lanesim's simulations took 60-115 s of make test under the emulator.
test386:
	scripts/qemu386exec_test.sh
	GOARCH=386 $(GO) build ./cmd/...
	GO=$(GO) scripts/test386.sh -count=1 $$($(GO) list ./... | grep -v '/cmd/')

lint: fmtcheck vet staticcheck

staticcheck:
	@for m in $(MODULES); do echo "== staticcheck ($$m)"; (cd $$m && $(GO) run $(STATICCHECK) ./...) || exit 1; done

## bench: the in-package benchmarks of the core (quick look; see bench-report for the published figures)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=$(BENCHTIME) ./semaphore/ ./keyedsem/ ./lanequeue/

## bench-report: run bench/ side by side (COUNT runs x BENCHTIME), then regenerate
## docs/benchmarks.md and docs/bench-*.svg. Quick check: make bench-report COUNT=1 BENCHTIME=100ms
COUNT ?= $(BENCHCOUNT)
bench-report:
	cd bench && $(GO) run ./cmd/report -count=$(COUNT) -benchtime=$(BENCHTIME)

## bench-redis: the Redis lanes' load test (fleetsim starts its own redis-server) and the per-key lock
## against redsync and redislock (lockbench, likewise), kept in bench/results/redislane.txt and
## redispeers.txt for the next bench-report; then re-render docs/benchmarks.md from the saved run
bench-redis:
	{ echo "$$ cd redislane && go run ./cmd/fleetsim"; \
	  (cd redislane && $(GO) run ./cmd/fleetsim); \
	  echo; echo "$$ cd redislane && go run ./cmd/fleetsim -hold 10ms"; \
	  (cd redislane && $(GO) run ./cmd/fleetsim -hold 10ms); \
	  echo; echo "$$ cd redislane && go run ./cmd/fleetsim -mode uncontended -duration 3s"; \
	  (cd redislane && $(GO) run ./cmd/fleetsim -mode uncontended -duration 3s); } > bench/results/redislane.txt 2>&1
	{ echo "$$ cd bench/redispeers && go run ./cmd/lockbench"; \
	  (cd bench/redispeers && $(GO) run ./cmd/lockbench); } > bench/results/redispeers.txt 2>&1
	cd bench && $(GO) run ./cmd/report -raw results/bench.txt

## fuzz: each fuzz target (fuzz/, and the barging targets that need semaphore's and keyedsem's test hooks) for FUZZTIME (default 30s); the seed corpus runs in `make test`.
## New inputs are minimised for at most 5s, or a short run can stall minimising.
fuzz:
	@for p in ./fuzz/ ./semaphore/ ./keyedsem/; do \
		for t in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "== $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s $$p || exit 1; done; done

lanesim:
	$(GO) run ./cmd/lanesim

clean:
	$(GO) clean -testcache
