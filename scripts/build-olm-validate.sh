#!/usr/bin/env bash
# Builds statecraft-olm-validate, which checks OLM bundle directories with the Operator
# Framework's own bundle loader and validators (e2e/olm-validate: a small CLI over
# github.com/operator-framework/api), into $CACHE/bin. Skips the build when its Go sources
# and module files are unchanged since the last one.
source "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

dir="$ROOT/e2e/olm-validate" stamp="$BIN/.olm-validate.stamp"
h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/*.go)"
if up_to_date "$stamp" "$h" && [ -x "$BIN/statecraft-olm-validate" ]; then
  log "statecraft-olm-validate: up to date"
  exit 0
fi
log "building statecraft-olm-validate"
(cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/statecraft-olm-validate" .)
echo "$h" > "$stamp"
