#!/usr/bin/env bash
# Imports the images scripts/build-images.sh built ($CACHE/images/*.tar) into a containerd,
# in namespace k8s.io (the one the kubelet's CRI uses), under the names in
# deploy/images/images.env. An image already there with the same manifest digest is skipped.
#
#   CONTAINERD_ADDRESS=/run/statecraft/containerd/containerd.sock scripts/import-images.sh
#   scripts/import-images.sh --address /path/containerd.sock [ID...]   (ids as in build-images.sh)
#
# CONTAINERD_NAMESPACE overrides k8s.io; CONTAINERD_SNAPSHOTTER (read by ctr) the snapshotter
# the images are unpacked for (containerd's default, overlayfs, otherwise).
source "$(dirname "$0")/lib.sh"

die() { printf '\033[1;31mimport-images: %s\033[0m\n' "$*" >&2; exit 1; }

ADDRESS="${CONTAINERD_ADDRESS:-}"
NAMESPACE="${CONTAINERD_NAMESPACE:-k8s.io}"
IDS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --address) ADDRESS="${2:?--address needs a value}"; shift 2 ;;
    --address=*) ADDRESS="${1#*=}"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) IDS+=("$1"); shift ;;
  esac
done
[ -n "$ADDRESS" ] || die "no containerd address: set CONTAINERD_ADDRESS or pass --address"
ADDRESS="${ADDRESS#unix://}"
[ -S "$ADDRESS" ] || die "no containerd socket at $ADDRESS"
command -v ctr >/dev/null || die "ctr not found (Debian package containerd)"

ctr_() { ctr --address "$ADDRESS" --namespace "$NAMESPACE" "$@"; }

# The manifest digest recorded in an archive built by build-images.sh (one image per archive).
archive_digest() {
  tar -xOf "$1" index.json | grep -oE '"digest": ?"sha256:[0-9a-f]{64}"' | head -n1 | grep -oE 'sha256:[0-9a-f]{64}'
}
# The digest containerd holds under NAME, if any.
present_digest() { ctr_ images ls "name==$1" | awk 'NR > 1 { print $3 }'; }

declare -A WANT=()
for id in "${IDS[@]}"; do WANT[$id]=1; done
imported=0 skipped=0
while IFS='=' read -r key name; do
  [[ "$key" == *_IMAGE ]] || continue
  id="${key%_IMAGE}"; id="${id,,}"; id="${id//_/-}"
  if [ ${#IDS[@]} -gt 0 ]; then [ -n "${WANT[$id]:-}" ] || continue; unset "WANT[$id]"; fi
  archive="$CACHE/images/$(echo "$name" | tr '/:@' '___').tar"
  [ -f "$archive" ] || die "$name: $archive missing; run scripts/build-images.sh $id"
  want="$(archive_digest "$archive")"
  [ -n "$want" ] || die "$archive: no manifest digest in its index.json"
  if [ "$(present_digest "$name")" = "$want" ]; then
    skipped=$((skipped + 1))
    continue
  fi
  log "importing $name (${want:7:12}) into $NAMESPACE"
  ctr_ images import "$archive" >/dev/null
  have="$(present_digest "$name")"
  [ "$have" = "$want" ] || die "$name: containerd holds ${have:-nothing}, expected $want"
  imported=$((imported + 1))
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$ROOT/deploy/images/images.env")
[ ${#WANT[@]} -eq 0 ] || die "unknown image id(s): ${!WANT[*]}"
log "images: $imported imported, $skipped already present (namespace $NAMESPACE at $ADDRESS)"
