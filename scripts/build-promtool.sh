#!/usr/bin/env bash
# Builds promtool, Prometheus's own rule checker and rule unit-test runner (the operators'
# tests/alerts.rs evaluate their alerts with `promtool test rules`), from the Prometheus Go
# module pinned in e2e/promtool/go.mod, into $CACHE/bin. Service discovery is
# left out (`remove_all_sd`): promtool's rule commands do not use it, and it is most of
# Prometheus's dependencies. Skips the build when the module files are unchanged.
source "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

dir="$ROOT/e2e/promtool" stamp="$BIN/.promtool.stamp"
h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum)"
if up_to_date "$stamp" "$h" && [ -x "$BIN/promtool" ]; then
  log "promtool: up to date"
  exit 0
fi
log "building promtool"
(cd "$dir" && go build -tags remove_all_sd -trimpath -ldflags "-s -w" -o "$BIN/promtool" \
  github.com/prometheus/prometheus/cmd/promtool)
echo "$h" > "$stamp"
