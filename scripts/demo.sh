#!/usr/bin/env bash
# `make demo`: shows what Statecraft can do so far (see README.md, "Where it stands").
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
cargo build -q --locked -p statecraft-shared --features testing --bin statecraft-echo-operator --example demo
ECHO_OPERATOR="$ROOT/target/debug/statecraft-echo-operator" "$ROOT/target/debug/examples/demo"
