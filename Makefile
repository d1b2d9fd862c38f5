# nid: `make help` lists the targets.
GO ?= go

.PHONY: help build check test bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## Build bin/nid (the first build compiles the Temporal server: minutes)
	$(GO) build -o bin/nid ./cmd/nid

check: ## gofmt, go vet, workflowcheck (workflow code stays deterministic)
	@test -z "$$(gofmt -l .)" || (gofmt -l . && echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet ./...
	$(GO) tool workflowcheck ./workflows/...

test: ## Run every test: workflow, config, CLI, adapters and end-to-end
	$(GO) test -timeout 30m ./...

bench: ## Orchestration overhead per turn and nid ls over 1,000 sessions
	$(GO) test -timeout 30m -run '^$$' -bench . -benchtime 1x ./e2e

clean: ## Remove built binaries
	rm -rf bin
