#!/usr/bin/env bash
# Builds statecraft-porcupine, the linearizability checker of the e2e tests' histories
# (e2e/porcupine: a small CLI over github.com/anishathalye/porcupine), into $CACHE/bin.
# Skips the build when its Go sources and module files are unchanged since the last one.
source "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

dir="$ROOT/e2e/porcupine" stamp="$BIN/.porcupine.stamp"
h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/*.go)"
if up_to_date "$stamp" "$h" && [ -x "$BIN/statecraft-porcupine" ]; then
  log "statecraft-porcupine: up to date"
  exit 0
fi
log "building statecraft-porcupine"
(cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/statecraft-porcupine" .)
echo "$h" > "$stamp"
