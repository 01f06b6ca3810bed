# toolwire — developer entry points. `make` (or `make help`) lists them.
#
# Tools are pinned: buf and staticcheck in tools/go.mod, the protoc plugins
# as tool directives in go.mod. Nothing is installed globally.

SHELL       := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
BUF         := $(GO) tool -modfile=tools/go.mod buf
STATICCHECK := $(GO) tool -modfile=tools/go.mod staticcheck

# Bound on each test binary's run (go test -timeout, per package): the
# fault tests' package took 15-22 minutes in CI runs on 2 cores, more when
# a NATS node stuck after a heal must be restarted; 40m leaves it room
# under CI's 90-minute limit.
TEST_TIMEOUT ?= 40m
# Extra flags for go test, e.g. TEST_FLAGS='-run TestCall -v'.
TEST_FLAGS   ?=
# Arguments for the dispatcher in `make run`, e.g. ARGS='--http 127.0.0.1:9080'.
ARGS         ?=
# Arguments for `make bench` and `make bench-shaped`.
BENCH_FLAGS  ?=
# Chart checks (make chart-check): pinned tools built from the module
# proxy into ./bin/chart (once per version), and the Kubernetes version
# the chart is rendered and validated for: its schemas are generated from
# the OpenAPI document of the k8s.io/kubernetes module at that version,
# whose checksum is pinned here.
HELM_VERSION          := v3.22.0
KUBECONFORM_VERSION   := v0.8.0
HELM_UNITTEST_VERSION := v1.1.2
KUBE_VERSION          := 1.35.4
KUBE_MODULE_SUM       := h1:o/8dBC/pHVpYoGV4OAIytAlNPZbdYVTXJHoYvXC4qzM=
CHART_BIN     := bin/chart
HELM          := $(CHART_BIN)/helm-$(HELM_VERSION)
KUBECONFORM   := $(CHART_BIN)/kubeconform-$(KUBECONFORM_VERSION)
HELM_UNITTEST := $(CHART_BIN)/helm-unittest-$(HELM_UNITTEST_VERSION)
KUBE_SCHEMAS  := $(CHART_BIN)/kubeschema-v$(KUBE_VERSION)
# nats-server at the version go.mod pins, to check the bundled NATS config.
NATS_SERVER   := $(CHART_BIN)/nats-server

# What `buf breaking` compares the contract with: a git revision, or
# `none`. Empty = chosen by scripts/proto-breaking.sh (see there).
BREAKING_AGAINST ?=

.PHONY: help run build generate verify lint test soak bench bench-shaped bench-archive clean \
	verify-proto-format verify-proto-lint verify-generated verify-mod verify-breaking verify-selftest mcp-everything mcp-clients azurite ts-sdk ts-tool \
	dashboard-e2e chromium iproute2 dashboard-screenshots chart-check chart-tools

help: ## list the targets
	@echo 'usage: make <target> [VAR=value ...]'
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_-]+:.*## / { printf "  %-20s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

run: ## build, then run the dispatcher: embedded NATS under ./data, in-process workers, API on 127.0.0.1:8080
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory mcp-everything; \
	else echo 'make run: npm not found: the MCP reference server will not be served'; fi
	@$(MAKE) --no-print-directory build
	./bin/dispatcher $(ARGS)

# The first build downloads the modules and compiles everything: minutes
# on two cores, so it says so and counts the packages as they compile (-v
# names only what is not cached: a warm build prints "up to date"); any
# other line (a download, an error) is printed as it is.
build: ## build every command (dispatcher, worker, toolctl, toolwire-bench) into ./bin
	@mkdir -p bin
	@echo 'make build: building ./bin (the first build downloads modules and compiles for several minutes on 2 cores) ...'
	@$(GO) build -v -o bin/ ./cmd/... 2>&1 | awk ' \
	  /^[^ ]+$$/ { n++; if (tty) printf "\r  %d packages compiled", n; else if (n % 50 == 0) print "  " n " packages compiled"; next } \
	  { if (tty && n) print ""; print; fflush() } \
	  END { if (tty && n) print ""; print n ? "  " n " packages compiled" : "  up to date" }' tty=$$([ -t 1 ] && echo 1 || echo 0)

# The TypeScript SDK's code is generated too (sdk/typescript/src/gen, by
# the protoc-gen-es its lockfile pins) and compiled with its pinned tsc
# into the checked-in sdk/typescript/dist: a proto change that breaks the
# SDK's hand-written layer fails here, in tsc. GENERATE_TS=0 leaves the
# TypeScript SDK out (no npm, no tsc: about a minute less under load):
# for scripts/verify-selftest.sh's checks of the Go side, never for a
# change that is to be committed.
GENERATE_TS ?= 1
generate: $(if $(filter 1,$(GENERATE_TS)),ts-sdk) ## regenerate pkg/toolproto and the TypeScript SDK (src/gen, dist) from proto/ (and format the .proto files)
	$(BUF) format -w
	rm -rf pkg/toolproto/toolwire
	$(BUF) generate
ifeq ($(GENERATE_TS),1)
	rm -rf sdk/typescript/src/gen sdk/typescript/dist
	$(BUF) generate --template sdk/typescript/buf.gen.yaml
	npm run --prefix sdk/typescript --silent build
endif

verify: verify-proto-format verify-proto-lint verify-breaking verify-generated verify-mod ## check the contract: buf format, lint and breaking; generated code current; go.mod tidy

verify-proto-format: ## buf format: .proto files are formatted
	$(BUF) format --diff --exit-code

verify-proto-lint: ## buf lint (STANDARD)
	$(BUF) lint

# Regenerates into the tree, then fails if proto/, pkg/toolproto/ or the
# TypeScript SDK's generated code and dist/ differ
# from the index: commit (or stage) proto changes together with their
# generated code. Staged changes count as done so that a change can be
# checked before it is committed; on a fresh clone index = HEAD.
verify-generated: generate ## generated code matches proto/ (regenerates, then compares with git)
	@stale=$$(git status --porcelain --untracked-files=all -- $(GENERATED) | grep -v '^. ' || true); \
	if [ -n "$$stale" ]; then \
		echo 'verify: generated code is stale: `make generate` changed proto/, pkg/toolproto/ or sdk/typescript/ (src/gen, dist):'; \
		echo "$$stale"; \
		git --no-pager diff --stat -- $(GENERATED); \
		echo 'verify: run `make generate` and commit the result with the .proto change'; \
		exit 1; \
	fi

GENERATED := proto pkg/toolproto sdk/typescript/src/gen sdk/typescript/dist

# tools/go.mod is not checked: tidying it needs test-only dependencies of
# buf that the module proxy here refuses, so it is kept minimal by hand.
verify-mod: ## go.mod and go.sum are tidy (go mod tidy -diff)
	$(GO) mod tidy -diff

verify-breaking: ## buf breaking (FILE) against the contract this change started from
	BUF='$(BUF)' BREAKING_AGAINST='$(BREAKING_AGAINST)' scripts/proto-breaking.sh

verify-selftest: ts-sdk ## prove `make verify` catches a stale regeneration, a breaking change and a change breaking the TypeScript SDK (in a temporary copy)
	scripts/verify-selftest.sh

lint: ## gofmt, go vet and the pinned staticcheck
	@unformatted=$$(git ls-files -co --exclude-standard -- '*.go' | while read -r f; do [ -e "$$f" ] && echo "$$f"; done | xargs -r gofmt -l); \
	if [ -n "$$unformatted" ]; then echo 'lint: gofmt -w needed for:'; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# go test also runs every fuzz target's seed corpus (testdata/fuzz and
# f.Add); fuzzing proper is `go test -fuzz`.
#
# TEST_FIRST lists the slowest packages, slowest first: go test starts
# packages in the order they are named (./... names each once more, and
# go test runs it once), and on 2 cores two run at a time, so the longest
# ones go first and the short ones fill in beside them. In alphabetical
# order internal/faulttest (about 14 minutes) started half-way through and
# ran on alone at the end: make test took 1,691 s against a sum of 2,574 s
# of package time (2026-11-29, two at a time). Times per package: the
# ok lines of a make test run.
#
# -vet=off: make lint runs the whole of go vet over every package and its
# tests; go test's own pass (a subset of vet's checks) repeated it, CPU
# the two cores of CI are short of.
TEST_FIRST ?= ./internal/faulttest ./internal/dispatch ./internal/audit ./internal/dashboard \
	./internal/policystore ./internal/mcpserver ./internal/dispatchd ./internal/api ./internal/worker \
	./internal/quickstart ./internal/executors/sandbox
test: mcp-everything mcp-clients azurite dashboard-e2e ts-sdk ts-tool chromium iproute2 ## run every test with the race detector
	$(GO) test -race -vet=off -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(TEST_FIRST) ./...

# The compressed-time soak of retention with an archive (issue 29;
# internal/faulttest TestSoakRetentionWithArchive: a 30 s window, 5 s
# segments, stores sized by the window, worker and dispatcher kills). make
# test runs it for SOAK_DURATION's default (90 s of load); this runs it
# for SOAK_DURATION (10m) at SOAK_RATE calls a second (80), with the race
# detector off so that the figures are the code's.
SOAK_DURATION ?= 10m
SOAK_RATE     ?= 80
soak: ## run the retention-with-archive soak for SOAK_DURATION (10m) and print its FIGURE line
	SOAK_DURATION=$(SOAK_DURATION) SOAK_RATE=$(SOAK_RATE) $(GO) test -count=1 -timeout 90m -run '^TestSoakRetentionWithArchive$$' -v $(TEST_FLAGS) ./internal/faulttest/

# The npm reference MCP server the mcp executor's tests run against,
# installed from the committed lockfile (only when missing or stale).
mcp-everything: testdata/mcp-everything/node_modules/.package-lock.json ## install the MCP reference server for the tests (npm ci)

testdata/mcp-everything/node_modules/.package-lock.json: testdata/mcp-everything/package-lock.json
	npm ci --prefix testdata/mcp-everything --no-audit --no-fund
	touch $@

# The npm MCP clients the MCP endpoint's tests run (the conformance suite,
# the Inspector, and the Node.js 22 they need, itself an npm package),
# installed from the committed lockfile (only when missing or stale).
mcp-clients: testdata/mcp-clients/node_modules/.package-lock.json ## install the MCP conformance suite and Inspector for the tests (npm ci)

testdata/mcp-clients/node_modules/.package-lock.json: testdata/mcp-clients/package-lock.json
	npm ci --prefix testdata/mcp-clients --no-audit --no-fund
	touch $@

# The TypeScript SDK's npm dependencies (its runtime: @bufbuild/protobuf,
# @connectrpc/connect, @connectrpc/connect-node; and protoc-gen-es and
# tsc for make generate), installed from its committed lockfile (only when
# missing or stale), with `ai` and `@openai/agents` (the adapters' tests):
# 40 packages, about 160 MB, 25 s (2026-11-29). Its
# tests (go test ./sdk/typescript/) import the checked-in dist/, and run on
# the machine's node and on the Node 22 of make mcp-clients.
ts-sdk: sdk/typescript/node_modules/.package-lock.json ## install the TypeScript SDK's dependencies for its tests and make generate (npm ci)

sdk/typescript/node_modules/.package-lock.json: sdk/typescript/package-lock.json
	npm ci --prefix sdk/typescript --no-audit --no-fund
	touch $@

# The TypeScript tool example's type checker (examples/typescript-tool:
# typescript and @types/node at the SDK's versions, 3 packages, 25 MB,
# a few seconds), installed from its committed lockfile (only when missing
# or stale); its test runs server.ts on the Node 22 of make mcp-clients.
ts-tool: examples/typescript-tool/node_modules/.package-lock.json ## install the TypeScript tool example's tsc for its test (npm ci)

examples/typescript-tool/node_modules/.package-lock.json: examples/typescript-tool/package-lock.json
	npm ci --prefix examples/typescript-tool --no-audit --no-fund
	touch $@

# Azurite, the Azure Storage emulator the archive's Azure Blob store test
# (internal/archive TestAzureStore) starts on loopback, installed from the
# committed lockfile (only when missing or stale): 453 packages, about
# 360 MB, 50 s (2026-11-29).
azurite: testdata/azurite/node_modules/.package-lock.json ## install Azurite for the archive's Azure Blob store test (npm ci)

testdata/azurite/node_modules/.package-lock.json: testdata/azurite/package-lock.json
	npm ci --prefix testdata/azurite --no-audit --no-fund
	touch $@

# The dashboard's browser tests (internal/dashboard/browser_test.go) drive
# Chromium with the npm playwright-core, installed from the committed
# lockfile (only when missing or stale). The browser is Debian's chromium
# (make chromium): Playwright's own download cannot run here.
dashboard-e2e: testdata/dashboard-e2e/node_modules/.package-lock.json ## install playwright-core for the dashboard's browser tests (npm ci)

testdata/dashboard-e2e/node_modules/.package-lock.json: testdata/dashboard-e2e/package-lock.json
	npm ci --prefix testdata/dashboard-e2e --no-audit --no-fund
	touch $@

# Debian's chromium for the browser tests, installed with apt-get when
# $(CHROMIUM) is missing: 25 packages, 112 MB to download, 29 s on the
# development machine (Debian 12, 2026-11-28); when the install fails for
# want of package lists, apt-get update (8 s there) and a second try. sudo
# when not root (without a terminal, sudo -n: no prompt). When it cannot
# install, it says why and lets the rest run: the browser tests then skip,
# or fail under CI=true.
CHROMIUM ?= /usr/bin/chromium

chromium: ## install Debian's chromium for the dashboard's browser tests (apt-get), when missing
	@if [ -x '$(CHROMIUM)' ]; then exit 0; fi; \
	why() { echo "make chromium: $$*; the dashboard's browser tests will be skipped (a failure with CI=true)"; }; \
	if ! command -v apt-get >/dev/null 2>&1; then why "$(CHROMIUM) is missing and there is no apt-get to install it (install Chromium there yourself)"; exit 0; fi; \
	sudo=; \
	if [ "$$(id -u)" != 0 ]; then \
		if ! command -v sudo >/dev/null 2>&1; then why "$(CHROMIUM) is missing and installing it needs root (no sudo): run apt-get install chromium as root"; exit 0; fi; \
		if [ -t 0 ]; then sudo=sudo; else sudo='sudo -n'; fi; \
	fi; \
	aptget() { $$sudo env DEBIAN_FRONTEND=noninteractive apt-get "$$@"; }; \
	echo "make chromium: $(CHROMIUM) is missing: installing Debian's chromium with apt-get (112 MB; about 30 s on a fast mirror) ..."; \
	if ! aptget install -y -q --no-install-recommends chromium </dev/null; then \
		echo 'make chromium: apt-get install failed; updating the package lists and trying again ...'; \
		if ! { aptget update -q </dev/null && aptget install -y -q --no-install-recommends chromium </dev/null; }; then \
			why "apt-get could not install chromium (its output is above)"; exit 0; \
		fi; \
	fi; \
	if [ -x '$(CHROMIUM)' ]; then '$(CHROMIUM)' --version 2>/dev/null || why "$(CHROMIUM) --version failed"; \
	else why "apt-get installed chromium but $(CHROMIUM) is still missing"; fi

# iproute2's ip, which the network-namespace fault tests of
# internal/faulttest (TestClusterPartitions) run as root: installed with
# apt-get when missing (it is in Debian's base images, so rarely). When it
# cannot be, the tests fail under CI=true and skip otherwise.
iproute2: ## install Debian's iproute2 (ip netns, veth, bridges) for the partition fault tests, when missing
	@if command -v ip >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "make iproute2: ip is missing and cannot be installed here (needs root and apt-get); the partition fault tests will fail under CI=true"; exit 0; fi; \
	echo "make iproute2: ip is missing: installing Debian's iproute2 with apt-get ..."; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 </dev/null || \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 </dev/null; } || \
		echo "make iproute2: apt-get could not install iproute2 (its output is above)"

# The README's screenshots (docs/images/*.png), taken by the browser tests
# themselves: the same scenarios as `make test`, writing their PNGs there.
dashboard-screenshots: dashboard-e2e chromium ## run the dashboard's browser tests, writing their screenshots to docs/images
	mkdir -p docs/images
	DASHBOARD_SHOTS=$(CURDIR)/docs/images $(GO) test -count=1 -run 'TestBrowser' $(TEST_FLAGS) ./internal/dashboard/

# The suite ends with the shaped calls' cost (issue 31: a client profile,
# a toolset and a delegation chain in force against plain calls, 3
# alternating pairs at 64 in flight on one stack); bench-shaped runs that
# part alone.
bench: ## run the benchmark suite (results for BENCHMARKS.md)
	$(GO) run ./cmd/toolwire-bench -suite $(BENCH_FLAGS)

bench-shaped: ## profile, toolset and chain in force against plain calls, 3 alternating pairs at 64 in flight (issue 31)
	$(GO) run ./cmd/toolwire-bench -shaped $(BENCH_FLAGS)

bench-archive: ## archive throughput: messages archived a second and a CPU-second (issue 29)
	$(GO) test -run XXX -bench BenchmarkArchiverThroughput -benchtime 3x ./internal/archive/

chart-check: chart-tools $(KUBE_SCHEMAS)/.done $(NATS_SERVER) ## lint, render, validate (kubeconform, strict schemas) and unit-test the Helm chart
	GO=$(GO) HELM=$(HELM) KUBECONFORM=$(KUBECONFORM) HELM_UNITTEST=$(HELM_UNITTEST) NATS_SERVER=$(NATS_SERVER) \
	KUBE_VERSION=$(KUBE_VERSION) SCHEMAS=$(KUBE_SCHEMAS) scripts/chart-check.sh

chart-tools: $(HELM) $(KUBECONFORM) $(HELM_UNITTEST) ## build the pinned helm, kubeconform and helm-unittest into ./bin/chart

$(HELM):
	GO=$(GO) scripts/chart-tools.sh helm $(HELM_VERSION) $@
$(KUBECONFORM):
	GO=$(GO) scripts/chart-tools.sh kubeconform $(KUBECONFORM_VERSION) $@
$(HELM_UNITTEST):
	GO=$(GO) scripts/chart-tools.sh helm-unittest $(HELM_UNITTEST_VERSION) $@

$(NATS_SERVER): go.mod go.sum
	$(GO) build -trimpath -o $@ github.com/nats-io/nats-server/v2

# Kubernetes schemas, generated offline by tools/kubeschema (a module of
# its own, standard library only): about 2.5 MB, so not committed.
$(KUBE_SCHEMAS)/.done: tools/kubeschema/main.go
	cd tools/kubeschema && $(GO) run . -module k8s.io/kubernetes@v$(KUBE_VERSION) \
		-sum '$(KUBE_MODULE_SUM)' -out $(CURDIR)/$(KUBE_SCHEMAS)
	touch $@

clean: ## remove ./bin (./data, the embedded server's store, is kept)
	rm -rf bin
