#!/usr/bin/env bash
# Regenerates what users install from the repository, and what statecraft-capability reads
# about each operator instead of linking its code:
# - crds/<operator>.yaml (the `crd` subcommand);
# - deploy/<operator>/operator.yaml (`manifests`: RBAC and Deployment, for namespace
#   statecraft-system);
# - deploy/<operator>/capabilities.json (`capabilities`: the criteria it claims);
# - deploy/<operator>/sample-objects.yaml (`sample-objects`: the objects it builds for its
#   sample resource; not for installing).
# e2e/tests/manifests_up_to_date.rs fails when these files are stale.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
for op in mysql kafka etcd; do
  cargo run -q --locked -p "statecraft-$op" -- crd > "crds/$op.yaml"
  mkdir -p "deploy/$op"
  cargo run -q --locked -p "statecraft-$op" -- manifests --namespace statecraft-system > "deploy/$op/operator.yaml"
  cargo run -q --locked -p "statecraft-$op" -- capabilities > "deploy/$op/capabilities.json"
  cargo run -q --locked -p "statecraft-$op" -- sample-objects > "deploy/$op/sample-objects.yaml"
  log "crds/$op.yaml deploy/$op/{operator.yaml,capabilities.json,sample-objects.yaml}"
done
