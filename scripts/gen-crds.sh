#!/usr/bin/env bash
# Regenerates crds/<operator>.yaml from each operator's `crd` subcommand. The test
# e2e/tests/crds_up_to_date.rs fails when these files are stale.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
for op in mysql kafka etcd; do
  cargo run -q --locked -p "statecraft-$op" -- crd > "crds/$op.yaml"
  log "crds/$op.yaml"
done
