# roboNet developer tasks. `make help` lists them.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

BUF_VERSION := v1.60.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GOLANGCI_LINT_VERSION := v2.15.0

GO_TEST_FLAGS ?=
FUZZTIME ?= 30s
FUZZ_SMOKE_TIME ?= 10s
BENCH ?= .
BENCHTIME ?= 1s

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
# The commit --version reports, also where the environment turns off Go's
# own VCS stamping (GOFLAGS=-buildvcs=false).
COMMIT_FLAGS = -ldflags "-X github.com/robonet/robonet/internal/version.commit=$(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo +modified)"

build: ## Build every binary into ./bin.
	go build $(COMMIT_FLAGS) -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## Run all tests with the race detector (starts a throwaway Postgres, and a replicated one for the failover test, unless ROBONET_TEST_POSTGRES(_HA) are set).
	scripts/with-postgres scripts/with-postgres-ha --standbys 2 go test -race -count=1 $(GO_TEST_FLAGS) ./...

.PHONY: test-short
test-short: ## Run the tests without the race detector, skipping slow ones.
	go test -short -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz the spec compiler for FUZZTIME (default 30s); fuzz-all runs every target.
	go test ./engine/spec -run '^$$' -fuzz FuzzCompile -fuzztime $(FUZZTIME) -timeout 0

# fuzz-run runs every fuzz target of the module (every func Fuzz... in a
# _test.go file), one after another (-fuzz takes one target per run), each
# for $(1). Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" when -fuzztime ends while a worker is
# starved of CPU (golang/go#75804, fixed in Go 1.27): such a run, which
# wrote no failing input, is run once more; a written failing input, or
# any other failure, fails at once.
define fuzz-run
	@set -euo pipefail; \
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	files=$$(grep -rl --include='*_test.go' --exclude-dir=testdata --exclude-dir=bin '^func Fuzz' . | sort); \
	for file in $$files; do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			for try in 1 2; do \
				echo "== $$name ($$(dirname "$$file"), $(1))"; \
				if go test "$$(dirname "$$file")" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(1) -timeout 0 2>&1 | tee "$$log"; then break; fi; \
				if [ $$try = 1 ] && grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
					echo "== $$name: the fuzz coordinator's deadline race (golang/go#75804), no failing input: once more"; continue; \
				fi; \
				exit 1; \
			done; \
		done; \
	done
endef

.PHONY: fuzz-all
fuzz-all: ## Run every fuzz target for FUZZTIME each (default 30s; e.g. FUZZTIME=10m for a long run).
	$(call fuzz-run,$(FUZZTIME))

.PHONY: fuzz-smoke
fuzz-smoke: ## Run every fuzz target for FUZZ_SMOKE_TIME (default 10s) each, one after another (CI).
	$(call fuzz-run,$(FUZZ_SMOKE_TIME))

.PHONY: bench
bench: ## Run benchmarks (BENCH=regexp, BENCHTIME=1s; Postgres as for test).
	scripts/with-postgres go test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./...

BENCH_CHECK = ROBONET_PG_DURABLE=1 scripts/with-postgres sh -c \
	'$(BIN)/robonode bench --postgres "$$ROBONET_TEST_POSTGRES" --short --rounds 3 --check docs/bench-baseline.json'

.PHONY: bench-check
bench-check: build ## Short robonode bench on a durable throwaway Postgres; fail if a median of three rounds fell >20% below docs/bench-baseline.json (twice in a row).
	@$(BENCH_CHECK) >/dev/null || { echo "bench-check: a ratio fell below the baseline; measuring once more to tell a regression from a noisy moment" >&2; $(BENCH_CHECK) >/dev/null; }

.PHONY: lint
lint: $(BIN)/golangci-lint ## go vet, gofmt and golangci-lint.
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(BIN)/golangci-lint run ./...

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Regenerate protobuf and gRPC code (Go, and the Python SDK's).
	$(BIN)/buf lint
	$(BIN)/buf generate
	scripts/generate-python

.PHONY: generate-python
generate-python: ## Regenerate the Python SDK's protobuf and gRPC modules (needs protoc and grpc_python_plugin).
	scripts/generate-python

.PHONY: verify-generate
verify-generate: generate ## Fail if generated code is stale.
	@if [ -n "$$(git status --porcelain -- proto sdk/python/robonet/_proto)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- proto sdk/python/robonet/_proto; exit 1; fi

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/golangci-lint ## Install pinned tools into ./bin.

$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/golangci-lint:
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: images
images: ## Build robonet/robonode:dev and robonet/postgres-ha:15-local (pg_auto_failover), with no registry (scripts/images).
	scripts/images

.PHONY: compose-secrets
compose-secrets: ## Create the compose mesh's CA, node certificates, API token and gossip key (kept if they exist).
	scripts/compose-secrets

.PHONY: compose-up
compose-up: images compose-secrets ## Bring up the docker-compose mesh (a replicated Postgres, three servers, three workers).
	docker-compose up -d

.PHONY: compose-down
compose-down: ## Stop the docker-compose mesh and remove its containers, network and volumes.
	docker-compose down -v --remove-orphans

.PHONY: compose-smoke
compose-smoke: ## Run the compose mesh end to end, killing a Waggler's node mid-run, then remove it (CI).
	scripts/compose-smoke

CHAOS_DURATION ?= 30m
CHAOS_OUT ?= chaos-out

.PHONY: chaos
chaos: images compose-secrets ## Chaos-test the compose mesh for CHAOS_DURATION (default 30m) with every fault at random; report in CHAOS_OUT.
	go run ./cmd/robochaos --duration $(CHAOS_DURATION) --out $(CHAOS_OUT)

.PHONY: chaos-smoke
chaos-smoke: images compose-secrets ## Chaos-test the compose mesh with every fault once (under 10 minutes; CI); report in CHAOS_OUT.
	go run ./cmd/robochaos --smoke --out $(CHAOS_OUT)

.PHONY: clean
clean: ## Remove built binaries and tools.
	rm -rf $(BIN)
