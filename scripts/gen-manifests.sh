#!/usr/bin/env bash
# Regenerates what users install from the repository, and what statecraft-capability reads
# about each operator instead of linking its code:
# - crds/<operator>.yaml (the `crd` subcommand);
# - deploy/<operator>/operator.yaml (`manifests`: RBAC and Deployment, for namespace
#   statecraft-system);
# - deploy/<operator>/install.yaml (`install`: the one file a user applies: Namespace
#   statecraft-system, CRDs, the users' ClusterRoles, RBAC, Deployment; also the kustomize
#   base's one resource);
# - deploy/<operator>/capabilities.json (`capabilities`: the criteria it claims);
# - deploy/<operator>/sample-objects.yaml (`sample-objects`: the objects it builds for its
#   sample resource; not for installing);
# - docs/api/<operator>.md (`api-reference`: every field of every resource, from the CRDs).
# e2e/tests/manifests_up_to_date.rs fails when these files are stale.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

# write FILE CMD...: replaces FILE with CMD's output only when CMD succeeds, in one rename,
# so that a build that fails (or a second run at the same time) never leaves an empty or
# half-written file behind.
TMP=""
trap 'rm -f "$TMP"' EXIT
write() {
  local file="$1"
  shift
  TMP="$(mktemp "$file.XXXXXX")"
  local tmp="$TMP"
  if "$@" > "$tmp"; then
    chmod 0644 "$tmp" && mv "$tmp" "$file"
  else
    rm -f "$tmp"
    return 1
  fi
}

mkdir -p docs/api
for op in mysql kafka etcd; do
  mkdir -p "deploy/$op"
  write "crds/$op.yaml" cargo run -q --locked -p "statecraft-$op" -- crd
  write "deploy/$op/operator.yaml" cargo run -q --locked -p "statecraft-$op" -- manifests --namespace statecraft-system
  write "deploy/$op/install.yaml" cargo run -q --locked -p "statecraft-$op" -- install --namespace statecraft-system
  write "deploy/$op/capabilities.json" cargo run -q --locked -p "statecraft-$op" -- capabilities
  write "deploy/$op/sample-objects.yaml" cargo run -q --locked -p "statecraft-$op" -- sample-objects
  write "docs/api/$op.md" cargo run -q --locked -p "statecraft-$op" -- api-reference
  log "crds/$op.yaml deploy/$op/{operator.yaml,install.yaml,capabilities.json,sample-objects.yaml} docs/api/$op.md"
done
