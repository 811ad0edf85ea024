# toolmesh — run `make help` for the targets.

GO          ?= go
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Bound for the whole test run; the e2e tests build and start real processes.
TEST_TIMEOUT ?= 15m
# Extra `go test` flags, e.g. GO_TEST_ARGS='-run TestRun -v'.
GO_TEST_ARGS ?=
# How long each fuzz target runs in `make fuzz`.
FUZZTIME    ?= 10s
# Arguments for `make run`, e.g. ARGS='--portal portal.yaml --log-level debug'.
ARGS        ?=
# staticcheck v0.8.x is the release line built for Go 1.26.
STATICCHECK_VERSION := v0.8.2

# Packages that have benchmarks, and "package:FuzzTarget" pairs.
BENCH_PKGS   = $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Benchmark' .)))
FUZZ_TARGETS = $(shell grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' . | sed -e 's|/[^/]*_test.go:func |:|')

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@echo "Usage: make <target>   (variables: ARGS, GO_TEST_ARGS, TEST_TIMEOUT, FUZZTIME, VERSION)"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: build ## Build and run toolmesh (registry, ext_proc, xDS, local data plane; demo Portal unless ARGS names one)
	@echo "starting bin/toolmesh run $(ARGS) (Ctrl-C stops it)"
	@bin/toolmesh run $(ARGS)

.PHONY: build
build: ## Build bin/toolmesh
	@echo "building bin/toolmesh (the first build downloads modules and compiles: a few minutes)"
	@$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/toolmesh ./cmd/toolmesh

.PHONY: sbom
sbom: build ## Write bin/toolmesh.cdx.json, a CycloneDX SBOM of the Go modules in bin/toolmesh
	@GO=$(GO) sh scripts/sbom.sh bin/toolmesh bin/toolmesh.cdx.json $(VERSION)
	@echo "wrote bin/toolmesh.cdx.json"

.PHONY: test
test: test-deps fmt-check vet ## Install or locate test dependencies (redis-server, shellcheck), check gofmt and go vet, then run every test with the race detector
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(GO_TEST_ARGS) ./...
	cd deploy && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GO_TEST_ARGS) ./...

.PHONY: lint
lint: fmt-check vet ## gofmt, go vet and staticcheck
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

.PHONY: bench
bench: ## Run the benchmarks (go test -bench . -benchmem)
	@test -n "$(BENCH_PKGS)" || { echo "no benchmarks"; exit 0; }; \
	$(GO) test -run '^$$' -bench . -benchmem $(GO_TEST_ARGS) $(BENCH_PKGS)

.PHONY: wasm
wasm: ## Build the example WebAssembly filters into bin/wasm (GOOS=wasip1)
	sh filters/wasm/examples/build.sh bin/wasm

.PHONY: conformance
conformance: ## Run the official MCP conformance suites against `toolmesh run` (needs npm)
	bash testdata/conformance/run.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 10s) each
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

.PHONY: test-deps
test-deps: ## Locate, or install with apt-get, what the tests need besides Go (redis-server, shellcheck, promtool)
	@sh scripts/test-deps.sh

.PHONY: fmt-check
fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	$(GO) vet ./...
	cd deploy && $(GO) vet ./...

# Deploy: the container image and the plain Kubernetes manifests. The deploy
# module (deploy/go.mod) holds the chart tests and the renderer, so Helm's
# and Kubernetes' libraries stay out of the main module; `make test` runs its
# tests after the main module's.
DOCKER      ?= docker
IMAGE       ?= toolmesh:$(VERSION)

.PHONY: image
image: ## Build the container image IMAGE (default toolmesh:VERSION) from the Dockerfile
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: manifests
manifests: ## Render deploy/k8s from the Helm chart in deploy/helm/toolmesh
	cd deploy && $(GO) run ./cmd/render
