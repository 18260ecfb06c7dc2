# lazy — build, lint, test, bench.
SHELL := /bin/bash
GO ?= go
CLAUDE_DIR ?= $(HOME)/.cache/lazy/claude-code
export CLAUDE_DIR
export LAZY_TEST_CLAUDE ?= $(CLAUDE_DIR)/node_modules/.bin/claude
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $$($(GO) env GOPATH)/bin/staticcheck)

.PHONY: all build deps lint test test-race test-all bench clean

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
	@echo "test: every package"
	$(GO) test -count=1 ./...

# Go benchmarks of every package, then the proxy against its baselines, each
# server and the load client in its own process.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./cmd/lazybench run

clean:
	rm -rf bin
