# lazy — build, lint, test, bench.
SHELL := /bin/bash
GO ?= go
CLAUDE_DIR ?= $(HOME)/.cache/lazy/claude-code
export CLAUDE_DIR
export LAZY_TEST_CLAUDE ?= $(CLAUDE_DIR)/node_modules/.bin/claude
AGENTS_DIR ?= $(HOME)/.cache/lazy/agents
export AGENTS_DIR
export LAZY_TEST_CODEX ?= $(AGENTS_DIR)/node_modules/.bin/codex
export LAZY_TEST_GEMINI ?= $(AGENTS_DIR)/node_modules/.bin/gemini
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $$($(GO) env GOPATH)/bin/staticcheck)


.PHONY: all build deps lint test fuzz chaos bench clean

all: build

build:
	$(GO) build -o bin/lazy ./cmd/lazy

deps:
	@scripts/deps.sh

lint:
	@echo "lint: gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@echo "lint: go vet"
	@$(GO) vet ./...
	@echo "lint: staticcheck"
	@$(STATICCHECK) ./...

# The actor and proxy packages run under the race detector; everything runs once.
test: deps lint
	@echo "test: race detector on actors, supervisor, proxy"
	$(GO) test -race -count=1 ./actors/... ./supervisor/... ./proxy/...
	@echo "test: every package (includes 50 kill -9s of the daemon: TestChaosKill9)"
	@art=$$(mktemp -d /tmp/lazy-artifacts.XXXXXX); \
	  LAZY_TEST_ARTIFACTS=$$art $(GO) test -count=1 -timeout 30m ./... && \
	  scripts/leakhunt.sh $$art; rc=$$?; rm -rf $$art; exit $$rc
	@$(MAKE) --no-print-directory fuzz

# Every fuzz target from the committed corpus, a fixed number of executions
# each (about 10 s here); FUZZTIME=30s or FUZZTIME=1000000x overrides it.
fuzz:
	@scripts/fuzz.sh

# The fault-injection suite alone, with more kills: make chaos KILLS=200;
# OUTAGES etcd outages of 35 s each (frozen, then stopped and started again);
# PAUSES rounds of a cluster member SIGSTOPped past its task leases
KILLS ?= 100
OUTAGES ?= 4
PAUSES ?= 3
chaos:
	LAZY_CHAOS_KILLS=$(KILLS) LAZY_CHAOS_OUTAGES=$(OUTAGES) LAZY_CHAOS_PAUSES=$(PAUSES) $(GO) test -count=1 -timeout 60m -run 'TestChaosKill9|TestClusterChaosEtcd|TestClusterChaosPause' -v ./cmd/lazy
	@echo "chaos: the cluster's remote and store outages, long form"
	LAZY_CHAOS_LONG=1 $(GO) test -count=1 -timeout 30m -run 'TestClusterChaos(PushRefused|StoreStopped)' -v ./cmd/lazy

# The headline: the daemon users run (a task with a live grant and a budget,
# usage rows, traffic events) against the tuned bare ReverseProxy, the
# DefaultTransport one and a direct connection, each figure as a ratio beside
# its target; then the proxy alone (proxy.New) and every Go benchmark's figure
# beside its baseline or target. Each server and the load client is its own
# process, five rounds: the 1-client load a call to each target in turn, the
# 64-client load each target in turn 250 ms at a time, and a second tuned
# bare proxy measured as one more target (its ratio to the first is printed
# as the run's noise). LAZYBENCH_CPUPROFILE=FILE on `lazybench
# serve-daemon` profiles the daemon.
# LAZY_BENCH_SCALE=1 adds the 1,000-task scale run (several minutes).
bench:
	$(GO) run ./cmd/lazybench run

clean:
	rm -rf bin
