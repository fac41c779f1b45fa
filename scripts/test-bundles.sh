#!/usr/bin/env bash
# Writes the OLM bundle of each operator (statecraft-capability bundle: its `capabilities`
# annotation is the level the report earned from results/evidence, or none) to
# results/bundles/<operator>, and checks it twice:
# - statecraft-olm-validate (scripts/build-go-tools.sh): the Operator Framework's own
#   bundle loader and validators, as `operator-sdk bundle validate` and OperatorHub run them;
#   any error fails, warnings are printed;
# - statecraft-capability assess on the bundle's manifests, with the objects the operator
#   builds for its sample as the operand: fails when the declared level is contradicted
#   (verdict "contradicted") or the bundle has errors (exit status 4).
# STATECRAFT_EVIDENCE_DIR, when set, is the evidence directory (as for the e2e tests).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

start=$SECONDS
"$ROOT/scripts/build-go-tools.sh"
evidence=()
if [ -n "${STATECRAFT_EVIDENCE_DIR:-}" ]; then evidence=(--evidence "$STATECRAFT_EVIDENCE_DIR"); fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
for op in mysql etcd kafka; do
  out="results/bundles/$op"
  log "$op: bundle → $out"
  cargo run -q --locked -p statecraft-capability -- bundle --operator "$op" --output "$out" "${evidence[@]}"

  log "$op: statecraft-olm-validate"
  if ! "$BIN/statecraft-olm-validate" --optional-values k8s-version=1.34 "$out"; then
    failed+=("$op: statecraft-olm-validate")
  fi

  # The operand checks need what the operator creates for a sample: the objects its own
  # builders make (deploy/<op>/sample-objects.yaml, kept fresh by the e2e suite).
  mkdir -p "$work/$op"
  cp "deploy/$op/sample-objects.yaml" "$work/$op/"
  log "$op: statecraft-capability assess"
  rc=0
  cargo run -q --locked -p statecraft-capability -- assess --manifests "$out/manifests" \
    --operand "$work/$op" --runbooks "$ROOT" --format json --output "$work/$op.json" || rc=$?
  # 0: assessed; 4: assessed, and the bundle has errors (listed in the report).
  if [ "$rc" != 0 ] && [ "$rc" != 4 ]; then
    failed+=("$op: assess exited $rc")
    continue
  fi
  jq -r '.operators[0].assessment
    | "declared: \(.declared_annotation // "none")\nverdict: \(.verdict): \(.summary)\nhygiene: \(.hygiene.summary)",
      (.bundle_errors[] | "bundle error: \(.)")' "$work/$op.json"
  verdict="$(jq -r '.operators[0].assessment.verdict' "$work/$op.json")"
  if [ "$verdict" = contradicted ]; then
    failed+=("$op: assess finds the declared level contradicted")
  fi
  if [ "$rc" = 4 ]; then
    failed+=("$op: assess finds errors in the bundle")
  fi
done

log "bundles checked in $((SECONDS - start)) s"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
