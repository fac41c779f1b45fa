#!/usr/bin/env bash
# The `kind` provider of the e2e suite, for machines with Docker (not this project's CI
# machines, which have no Docker engine: there the local cluster of `make cluster-up` runs
# the same tests). Creates a kind cluster named `statecraft` at the Kubernetes version the
# local cluster pins, builds the images with the same recipes (scripts/build-images.sh) and
# loads them into the kind node, so pods find them with imagePullPolicy: IfNotPresent.
#
# Then: STATECRAFT_E2E_PROVIDER=kind make e2e
source "$(dirname "$0")/../../scripts/lib.sh"
command -v kind >/dev/null || { echo "kind not found: see https://kind.sigs.k8s.io" >&2; exit 1; }
KUBE_VERSION="$(cd "$ROOT/e2e/cluster/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kind get clusters 2>/dev/null | grep -qx statecraft || kind create cluster --name statecraft --image "kindest/node:$KUBE_VERSION"
"$ROOT/scripts/build-images.sh"
for archive in "$CACHE"/images/*.tar; do
  log "loading $(basename "$archive")"
  kind load image-archive "$archive" --name statecraft
done
log "kind cluster statecraft ready: STATECRAFT_E2E_PROVIDER=kind make e2e"
