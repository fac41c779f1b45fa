#!/usr/bin/env bash
# Regenerates what users install from the repository: crds/<operator>.yaml (the `crd`
# subcommand) and deploy/<operator>/operator.yaml (the `manifests` subcommand: RBAC and
# Deployment, for namespace statecraft-system). e2e/tests/manifests_up_to_date.rs fails
# when these files are stale.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
for op in mysql kafka etcd; do
  cargo run -q --locked -p "statecraft-$op" -- crd > "crds/$op.yaml"
  mkdir -p "deploy/$op"
  cargo run -q --locked -p "statecraft-$op" -- manifests --namespace statecraft-system > "deploy/$op/operator.yaml"
  log "crds/$op.yaml deploy/$op/operator.yaml"
done
