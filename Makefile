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
GOVULNCHECK_VERSION := v1.10.0
# VULNDB is govulncheck's -db. auto: https://vuln.go.dev when it answers,
# otherwise the database built from golang.org/x/vulndb@VULNDB_VERSION, which
# the Go module proxy serves, in bin/vulndb (scripts/vulncheck.sh).
VULNDB      ?= auto
VULNDB_VERSION ?= latest

# The Go modules: the main module (the repository root), e2e (end-to-end
# tests and the conformance programs, with the MCP SDKs they use) and deploy
# (chart tests and the renderer, with Helm's and Kubernetes' libraries). Each
# has its own go.mod, so neither set of libraries is a dependency of the
# main module; e2e and deploy use it through `replace ... => ../`.
MODULES     := . e2e deploy

# Packages of the main module that have benchmarks, and "package:FuzzTarget"
# pairs (scripts/vulnexcept's too: `make fuzz` runs go test in the package's
# directory, so a nested module's targets run in their own module).
BENCH_PKGS   = $(sort $(dir $(shell grep -rl --include='*_test.go' --exclude-dir=e2e --exclude-dir=deploy '^func Benchmark' .)))
FUZZ_TARGETS = $(shell grep -r --include='*_test.go' --exclude-dir=e2e --exclude-dir=deploy -o '^func Fuzz[A-Za-z0-9_]*' . | sed -e 's|/[^/]*_test.go:func |:|')

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@echo "Usage: make <target>   (variables: ARGS, GO_TEST_ARGS, TEST_TIMEOUT, FUZZTIME, VERSION, BENCH_COUNT, BENCH_TIME, SCALE, LOAD_DURATION, VULNDB)"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: build ## Build and run toolmesh (registry, ext_proc, xDS, local data plane; demo Portal unless ARGS names one)
	@echo "starting bin/toolmesh run $(ARGS) (Ctrl-C stops it)"
	@bash scripts/run.sh bin/toolmesh $(ARGS)

.PHONY: build
build: ## Build bin/toolmesh
	@GO=$(GO) bash scripts/build.sh bin/toolmesh $(VERSION)

.PHONY: sbom
sbom: build ## Write bin/toolmesh.cdx.json, a CycloneDX SBOM of the Go modules in bin/toolmesh
	@GO=$(GO) sh scripts/sbom.sh bin/toolmesh bin/toolmesh.cdx.json $(VERSION)
	@echo "wrote bin/toolmesh.cdx.json"

.PHONY: vulncheck
vulncheck: ## govulncheck (golang.org/x/vuln) on every module, with vuln.go.dev or its copy from the module proxy; fails when code calls a known-vulnerable symbol not accepted by scripts/vulncheck-exceptions.txt
	@GO=$(GO) VULNDB_VERSION=$(VULNDB_VERSION) sh scripts/vulncheck.sh $(GOVULNCHECK_VERSION) $(VULNDB) $(MODULES)

# `make test` runs scripts/test.sh: every step runs even when an earlier one
# failed (test dependencies, gofmt, standalone, go vet, then the tests of the
# main, e2e and deploy modules), and the summary at the end lists every
# failed step, package and test; it exits non-zero if any failed.
.PHONY: test
test: ## Install or locate test dependencies (redis-server, shellcheck, chromium, promtool, node, npm), check gofmt and go vet, then run every test of the three modules; report every failure at the end
	@GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) GO_TEST_ARGS='$(GO_TEST_ARGS)' bash scripts/test.sh

.PHONY: test-quick
test-quick: ## gofmt, go vet and the main module's tests (race detector), without e2e, deploy or test dependencies
	@GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) GO_TEST_ARGS='$(GO_TEST_ARGS)' bash scripts/test.sh quick

.PHONY: lint
lint: fmt-check vet standalone ## gofmt, go vet, go mod tidy and staticcheck, on every module
	@set -e; for m in $(MODULES); do \
		echo "go mod tidy -diff: $$m"; \
		(cd $$m && $(GO) mod tidy -diff) || { echo "run go mod tidy in $$m"; exit 1; }; \
		echo "staticcheck: $$m"; \
		(cd $$m && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...); \
	done

# `make bench` runs every Benchmark* of the main module (BENCH_PKGS: every
# package with one, deploy aside) and of e2e, BENCH_COUNT times each, and
# writes the raw output to
# bench/out/{main,e2e}.txt (git-ignored) and benchstat's summary to
# bench/out/summary.txt. The scale benchmarks run at their small default
# sizes here (internal/scalegen: 50 and 500 routes); `make bench-scale`
# measures large catalogs (docs/benchmarks.md). With the defaults it takes
# about 25-30 minutes on the 2-core development machine (one count: 6).
BENCH_COUNT ?= 5
BENCH_TIME  ?= 1s
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
# Route counts of `make bench-scale` (scalegen.SizesEnv); 10,000 routes (one
# million tools) also fit (about 6 GB of registry heap, docs/benchmarks.md).
SCALE       ?= 1000,5000
# Duration of `make load`.
LOAD_DURATION ?= 60s

.PHONY: bench
bench: ## Run every benchmark BENCH_COUNT times (default 5) into bench/out, summary in bench/out/summary.txt
	@mkdir -p bench/out
	@# sh has no pipefail: the status of go test goes through a file.
	{ $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) -timeout 0 $(GO_TEST_ARGS) $(BENCH_PKGS); echo $$? > bench/out/.rc; } | tee bench/out/main.txt; exit $$(cat bench/out/.rc)
	{ cd e2e && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) -timeout 0 $(GO_TEST_ARGS) ./...; echo $$? > ../bench/out/.rc; } | tee bench/out/e2e.txt; exit $$(cat bench/out/.rc)
	cat bench/out/main.txt bench/out/e2e.txt > bench/out/all.txt
	$(GO) run golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) bench/out/all.txt > bench/out/summary.txt
	@# The headline figures: the extproc server against the no-op baseline,
	@# median of the BENCH_COUNT runs (docs/benchmarks.md).
	grep '^BenchmarkVsBaseline' bench/out/main.txt | awk '{for (i = 2; i <= NF; i++) if ($$i == "x-baseline") print $$1, $$(i-1)}' | \
		sort -k1,1 -k2,2g | awk '{n[$$1]++; v[$$1, n[$$1]] = $$2} END {for (k in n) printf "%-48s x-baseline %s (median of %d)\n", k, v[k, int((n[k] + 1) / 2)], n[k]}' | \
		sort | tee bench/out/ratios.txt
	@echo "wrote bench/out/summary.txt and bench/out/ratios.txt"

.PHONY: bench-scale
bench-scale: ## Run the scale benchmarks once at SCALE routes (default 1000,5000) into bench/out/scale.txt
	@mkdir -p bench/out
	{ TOOLMESH_BENCH_SCALE=$(SCALE) GOMEMLIMIT=$${GOMEMLIMIT:-15GiB} $(GO) test -run '^$$' -bench 'BenchmarkScale' -count 1 -timeout 0 ./registry/refresher/ ./registry/redisstore/ ./xds/; echo $$? > bench/out/.rc; } | tee bench/out/scale.txt; exit $$(cat bench/out/.rc)

.PHONY: load
load: build ## Load with faults for LOAD_DURATION (default 60s): 16 clients, both eras, Tool Service restarts, Portal rewrites
	cd e2e && $(GO) run ./cmd/loadfaults --toolmesh $(CURDIR)/bin/toolmesh --duration $(LOAD_DURATION)

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
		$(GO) -C $$pkg test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) .; \
	done

.PHONY: test-deps
test-deps: ## Locate, or install with apt-get, what the tests need besides Go (redis-server, shellcheck, chromium, promtool, node, npm)
	@sh scripts/test-deps.sh

.PHONY: standalone
standalone: ## Fail on references a reader of the repository cannot follow (the product spec, research notes, files outside it)
	@if git grep -nIE 'SPEC §[0-9]|research/[a-z]+\.md|\.\./shared/' -- . ':!Makefile'; then \
		echo "the repository must stand alone: cite docs/ or a public source instead"; exit 1; fi

# gofmt walks directories, not modules: `.` covers all three.
.PHONY: fmt-check
fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# go vet builds with the flags of each module's tests (-race for main and
# e2e, as `make test` runs them), so vet and the tests share one compilation
# of the dependencies in the build cache (scripts/test.sh).
.PHONY: vet
vet:
	@set -e; for m in $(MODULES); do \
		race=-race; [ $$m = deploy ] && race=; \
		echo "go vet $$race: $$m"; \
		(cd $$m && $(GO) vet $$race ./...); \
	done

# Deploy: the container image and the plain Kubernetes manifests. The deploy
# module (deploy/go.mod) holds the chart tests and the renderer, so Helm's
# and Kubernetes' libraries stay out of the main module; `make test` runs its
# tests after the main module's and e2e's.
DOCKER      ?= docker
IMAGE       ?= toolmesh:$(VERSION)

.PHONY: image
image: ## Build the container image IMAGE (default toolmesh:VERSION) from the Dockerfile
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: manifests
manifests: ## Render deploy/k8s from the Helm chart in deploy/helm/toolmesh
	cd deploy && $(GO) run ./cmd/render
