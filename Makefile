# Statecraft: `make demo` and `make test` are the two entry points (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

.PHONY: help deps build test check manifests bundles bench demo fmt cluster-up cluster-down e2e images release-images

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

deps: ## install Debian packages, build Kubernetes/etcd from Go modules, install the S3 test server
	@scripts/deps.sh

build: deps ## build every crate
	$(CARGO) build --workspace --all-features --locked

test: deps check ## install what is needed, then the checks and every test (unit, real API server, real S3, cluster checks)
	$(CARGO) test --workspace --all-features --locked --no-fail-fast
	cd e2e/porcupine && GOFLAGS=-mod=mod go test ./...
	@scripts/test-bundles.sh
	@scripts/test-release-images.sh
	@scripts/test-cluster.sh

images: deps ## build the container images offline (cached)
	@scripts/build-images.sh

release-images: ## build the operator images with Docker, tagged <version> and dev; push with STATECRAFT_REGISTRY_USER/_PASSWORD
	@scripts/release-images.sh

cluster-up: deps ## bring up the local single-node Kubernetes cluster
	@e2e/cluster/up.sh

cluster-down: ## stop the local cluster and remove everything it made
	@e2e/cluster/down.sh

e2e: deps ## run the e2e suite (E2E_FILTER=<substring> narrows it; STATECRAFT_E2E_PROVIDER=kind after e2e/kind/up.sh)
	@if [ "$${STATECRAFT_E2E_PROVIDER:-local}" = local ]; then e2e/cluster/up.sh && scripts/build-previous-operator.sh; fi
	MYSQL_FAILOVER_RUNS=$${MYSQL_FAILOVER_RUNS:-5} $(CARGO) test -p statecraft-e2e --locked --no-fail-fast -- --ignored --test-threads=2 $(E2E_FILTER)

check: ## formatting and lints (clippy refuses unwrap, expect and panic outside tests)
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features --locked -- -D warnings

bench: deps ## benchmarks; numbers go to results/bench/
	$(CARGO) bench -p statecraft-shared --bench s3_store
	$(CARGO) bench -p statecraft-kafka --bench topics

demo: deps ## what Statecraft can show so far (see README)
	@scripts/demo.sh
	@$(CARGO) run -q --locked -p statecraft-capability -- report

bundles: ## OLM bundles in results/bundles/, their capabilities level the one the evidence earned, checked by OLM's validators and assess
	@scripts/test-bundles.sh

manifests: ## regenerate crds/ and deploy/<operator>/ (install manifests, claims, sample objects) from the operators' subcommands
	@scripts/gen-manifests.sh

fmt: ## format the code
	$(CARGO) fmt --all
