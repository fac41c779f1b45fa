# Statecraft: `make demo` and `make test` are the two entry points (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

.PHONY: help deps build test test-unit test-kube check crds bench demo fmt clippy clean-cache

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## install Debian packages, build Kubernetes/etcd from Go modules, install the S3 test server
	@scripts/deps.sh

build: deps ## build every crate
	$(CARGO) build --workspace --all-features --locked

test: deps ## install what is needed, then run every test
	$(CARGO) test --workspace --all-features --locked --no-fail-fast

check: ## formatting and lints
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features --locked -- -D warnings

bench: deps ## benchmarks; numbers go to results/bench/
	$(CARGO) bench -p statecraft-shared --bench s3_store

demo: deps ## what Statecraft can show so far (see README)
	@scripts/demo.sh

crds: ## regenerate crds/ from each operator's `crd` subcommand
	@scripts/gen-crds.sh

fmt: ## format the code
	$(CARGO) fmt --all
