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
build: ## Build every binary into ./bin.
	go build -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## Run all tests with the race detector (starts a throwaway Postgres unless ROBONET_TEST_POSTGRES is set).
	scripts/with-postgres go test -race -count=1 $(GO_TEST_FLAGS) ./...

.PHONY: test-short
test-short: ## Run the tests without the race detector, skipping slow ones.
	go test -short -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz the spec compiler for FUZZTIME (default 30s); fuzz-all runs every target.
	go test ./engine/spec -run '^$$' -fuzz FuzzCompile -fuzztime $(FUZZTIME) -timeout 0

# fuzz-run runs every fuzz target of the module (every func Fuzz... in a
# _test.go file), one after another (-fuzz takes one target per run), each
# for $(1).
define fuzz-run
	@set -euo pipefail; \
	files=$$(grep -rl --include='*_test.go' --exclude-dir=testdata --exclude-dir=bin '^func Fuzz' . | sort); \
	for file in $$files; do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "== $$name ($$(dirname "$$file"), $(1))"; \
			go test "$$(dirname "$$file")" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(1) -timeout 0; \
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

.PHONY: lint
lint: $(BIN)/golangci-lint ## go vet, gofmt and golangci-lint.
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(BIN)/golangci-lint run ./...

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Regenerate protobuf and gRPC code.
	$(BIN)/buf lint
	$(BIN)/buf generate

.PHONY: verify-generate
verify-generate: generate ## Fail if generated code is stale.
	@if [ -n "$$(git status --porcelain -- proto)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; git status --porcelain -- proto; exit 1; fi

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

.PHONY: clean
clean: ## Remove built binaries and tools.
	rm -rf $(BIN)
