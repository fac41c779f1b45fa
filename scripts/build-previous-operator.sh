#!/usr/bin/env bash
# Builds an operator's image from an earlier commit, tagged `previous` (for example
# docker.io/statecraft/statecraft-mysql:previous), and imports it into the local cluster's
# containerd: the e2e test of operator upgrades installs it first, lets it make a cluster,
# then replaces it with the current build, which must adopt that cluster without
# restarting its pods.
#
#   scripts/build-previous-operator.sh [ID...]   (default: every operator in the .ref file)
#
# The commit is PREVIOUS_REF, by default ID's line in deploy/images/previous-operator.ref (the
# last build users ran; move it forward with each release). Its sources are exported with
# `git archive` to $CACHE/previous/<commit>, and built there with that commit's own image
# recipe and a target directory of their own, so that the current build's stays warm.
source "$(dirname "$0")/lib.sh"
REFS="$ROOT/deploy/images/previous-operator.ref"

# build ID: builds and imports ID's image of its commit.
build() {
  local ID="$1" REF COMMIT SRC KEY TARGET
  REF="${PREVIOUS_REF:-$(awk -v id="$ID" '$1 == id { print $2 }' "$REFS")}"
  [ -n "$REF" ] || { echo "no line for $ID in deploy/images/previous-operator.ref" >&2; exit 1; }
  COMMIT="$(git -C "$ROOT" rev-parse --verify "$REF^{commit}")"
  SRC="$CACHE/previous/$COMMIT"
  if [ ! -f "$SRC/.exported" ]; then
    log "exporting $ID sources of $COMMIT to $SRC"
    rm -rf "$SRC" && mkdir -p "$SRC"
    git -C "$ROOT" archive "$COMMIT" | tar -x -C "$SRC"
    touch "$SRC/.exported"
  fi
  KEY="$(printf '%s' "$ID" | tr 'a-z-' 'A-Z_')_IMAGE"
  grep -q "^$KEY=" "$SRC/deploy/images/images.env" || { echo "no $KEY in $COMMIT's images.env" >&2; exit 1; }
  # The same image name with the tag `previous`.
  sed -i -E "s#^($KEY=[^:]+):.*#\1:previous#" "$SRC/deploy/images/images.env"
  TARGET="$CACHE/images/cargo-target-previous"
  # Seeded once from the current build's target directory: the dependencies are mostly the
  # same, so only what differs compiles.
  if [ ! -d "$TARGET" ] && [ -d "$CACHE/images/cargo-target" ]; then
    log "seeding $TARGET from the current build's target directory"
    cp -a "$CACHE/images/cargo-target" "$TARGET"
  fi
  STATECRAFT_IMAGES_TARGET_DIR="$TARGET" "$SRC/scripts/build-images.sh" "$ID"
  CONTAINERD_ADDRESS="${CONTAINERD_ADDRESS:-/run/statecraft/containerd/containerd.sock}" \
    "$SRC/scripts/import-images.sh" "$ID"
  log "$(grep "^$KEY=" "$SRC/deploy/images/images.env" | cut -d= -f2) is $COMMIT's build"
}

if [ $# -eq 0 ]; then
  set -- $(awk '!/^#/ && NF { print $1 }' "$REFS")
fi
for id in "$@"; do
  build "$id"
done
