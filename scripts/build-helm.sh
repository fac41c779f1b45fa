#!/usr/bin/env bash
# Builds helm, Helm 4's own CLI, from the Helm Go module pinned in e2e/helm/go.mod, into
# $CACHE/bin, so that charts are linted and rendered (`helm lint`, `helm template`) by the
# code users install them with. Skips the build when the module files are unchanged.
source "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

dir="$ROOT/e2e/helm" stamp="$BIN/.helm.stamp"
h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum)"
if up_to_date "$stamp" "$h" && [ -x "$BIN/helm" ]; then
  log "helm: up to date"
  exit 0
fi
log "building helm"
# Helm's own release build stamps its version in; without it `helm version` says only "v4.3".
(cd "$dir" && v="$(go list -m -f '{{.Version}}' helm.sh/helm/v4)" &&
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$v" \
    -o "$BIN/helm" helm.sh/helm/v4/cmd/helm)
echo "$h" > "$stamp"
