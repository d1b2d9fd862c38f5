# nid: `make help` lists the targets.
GO ?= go

.PHONY: help build check test deps fuzz bench bench-agents bench-long bench-cluster bench-scale clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# bin/nid carries the plain build of cmd/nid, which links the Temporal server,
# and runs it as a child process for nid up and nid server, so that no other
# command pays to initialise the server's packages (docs/performance.md).
build: ## Build bin/nid (the first build compiles the Temporal server: minutes)
	$(GO) build -o cmd/nid/nid-server.bin ./cmd/nid
	$(GO) build -tags nidlean -o bin/nid ./cmd/nid

check: ## gofmt, go vet, workflowcheck (workflow code stays deterministic)
	@test -z "$$(gofmt -l .)" || (gofmt -l . && echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/...

AGENTS := agents/testdata/agents

test: deps ## Run every test (installs what they need first: see deps)
	$(GO) test -timeout 30m ./...

# The Debian packages the tests drive, as package:program: Chromium for the
# dashboard test, bubblewrap and socat for Claude Code's and Codex's sandboxes,
# curl for the agent that probes its network in the adapter conformance suite,
# zsh and fish for the shell completion tests (bash is there already);
# PostgreSQL for the Temporal cluster of the several-hosts test; docker-compose
# to check docker-compose.yml (it needs no Docker daemon for that).
DEBS := chromium:/usr/bin/chromium bubblewrap:/usr/bin/bwrap socat:/usr/bin/socat curl:/usr/bin/curl zsh:/usr/bin/zsh fish:/usr/bin/fish postgresql:/usr/bin/pg_ctlcluster docker-compose:/usr/bin/docker-compose

deps: $(AGENTS)/node_modules/.package-lock.json ## Install the pinned agent CLIs (npm) and the Debian packages the tests drive (chromium, bubblewrap, socat, curl, zsh, fish, postgresql, docker-compose)
	@missing=""; for d in $(DEBS); do test -x "$${d#*:}" || missing="$$missing $${d%%:*}"; done; \
	test -z "$$missing" || { [ "$$(id -u)" = 0 ] && apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; } || \
		{ echo "the tests need Debian's$$missing: apt-get install$$missing"; exit 1; }

$(AGENTS)/node_modules/.package-lock.json: $(AGENTS)/package.json $(AGENTS)/package-lock.json
	cd $(AGENTS) && npm ci --no-audit --no-fund

# FUZZTIME is how much each fuzz target runs: a count of inputs, not a
# duration, because Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" when a duration ends while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27) even though nothing was found.
FUZZTIME ?= 40000x

fuzz: ## Run every fuzz target on its checked-in seeds and FUZZTIME (40000x) new inputs each
	@set -e; for file in $$(grep -rlE --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git '^func Fuzz' .); do \
		for name in $$(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' $$file); do \
			echo "fuzz $$name ($$(dirname $$file))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$(dirname $$file); \
		done; \
	done

bench: ## Orchestration gap between turns and the floor (Temporal's own), nid ls over 1,000 sessions, 1,000 sessions started, nid up's memory (1, 50, 200 and 1,000 sessions; 10,000 turns), with the goals
	$(GO) test -timeout 60m -run '^$$' -bench 'TurnOverhead|Ls1000|Memory|FleetStart' -benchtime 1x ./e2e

# NID_BENCH_TURNS sets how many turns each side takes (default 20).
bench-agents: deps ## A turn of the real Claude Code and Codex CLIs by hand and through nid: median, p90 and their ratio against the goals
	$(GO) test -timeout 60m -run '^$$' -bench 'Agents' -benchtime 1x ./e2e

bench-long: ## One session for 10,000 turns: history bound, exact counters, time and memory (~15+ minutes)
	$(GO) test -timeout 40m -run '^$$' -bench LongRun -benchtime 1x ./e2e

bench-cluster: deps ## 50 and 200 sim sessions on the embedded server and on a PostgreSQL cluster with two hosts: turn overhead, nid ls; 200 new sessions started on the cluster, with the goal (~30+ minutes)
	$(GO) test -timeout 90m -run '^$$' -bench Cluster -benchtime 1x ./e2e

# NID_SCALE_QUICK=1 runs a smaller load for development; NID_SCALE_BACKENDS
# (embedded,cluster), NID_SCALE_PARTS (registry,group,feed) and
# NID_SCALE_GROUPS (100,500,1000) pick what runs (docs/scale.md).
bench-scale: deps ## The hosts registry, groups of 100-1,000 sessions and the feed over 10,000 at a fleet's rates, embedded and PostgreSQL: throughput, p50/p99, history growth, where p99 passes 1 s; a sim session's cost a turn (~20 minutes)
	$(GO) test -timeout 40m -run '^$$' -bench 'Scale' -benchtime 1x ./e2e

clean: ## Remove built binaries
	rm -rf bin cmd/nid/nid-server.bin
