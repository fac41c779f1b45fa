#!/usr/bin/env bash
# Builds the container images of the local cluster, offline (no Docker, no registry), as
# OCI archives in $CACHE/images/<name with / and : as _>.tar that scripts/import-images.sh
# imports into containerd. The image names are in deploy/images/images.env; each image's
# recipe is deploy/images/<id>/recipe.sh (see deploy/images/README.md).
#
#   scripts/build-images.sh               build every image
#   scripts/build-images.sh mariadb tools build some (ids: pause mariadb mysqld-exporter etcd kafka
#                                         kafka-previous coredns tools statecraft-mysql statecraft-etcd
#                                         statecraft-kafka statecraft-echo)
#
# Root filesystems: Debian images start from one `debootstrap --variant=minbase bookworm`
# tarball, made once and cached in $CACHE/images/base/; static images (Go and Rust binaries)
# start from deploy/images/static-base; pause starts from nothing. Each image is one layer,
# packed with umoci. An image is rebuilt only when its inputs change: its recipe directory,
# its name, the base it starts from, the packing code below, and the artifacts its recipe's
# prepare step names in INPUTS (binaries). Run as root; installs what it needs with apt-get.
source "$(dirname "$0")/lib.sh"
shopt -s inherit_errexit
set -E
trap 'printf "\033[1;31mbuild-images: failed (exit %s) at line %s: %s\033[0m\n" "$?" "$LINENO" "$BASH_COMMAND" >&2' ERR

IMAGES_DIR="$ROOT/deploy/images"
OUT="$CACHE/images"
SUITE=bookworm
# The static operator build has its own target directory: a --target build shares nothing
# with target/{debug,release}, and cargo locks a target directory for the whole build, which
# would stall everyone else's cargo in the checkout for minutes.
OPERATOR_TARGET_DIR="${STATECRAFT_IMAGES_TARGET_DIR:-$OUT/cargo-target}"
HOST_PACKAGES=(debootstrap umoci gcc libc6-dev binutils libcap2-bin unzip ca-certificates maven)

die() { printf '\033[1;31mbuild-images: %s\033[0m\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and file ownership need it)"
mkdir -p "$OUT/base" "$OUT/bin" "$OUT/work"
# One build at a time (the cluster bring-up runs this script too).
exec 9>"$OUT/.lock"
flock -n 9 || { log "waiting for another build-images.sh to finish"; flock 9; }

# ---------------------------------------------------------------- host tools

install_host_packages() {
  local missing=() p
  for p in "${HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The Debian mirrors the host's apt uses (one-line or deb822 sources), unless overridden.
apt_uri() { # PATTERN
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v '^[[:space:]]*#' | grep -oE "https?://[^ ]*/$1/?( |\$)" | head -n1 | tr -d ' ' | sed 's:/$::' || true
}
DEBIAN_MIRROR="${DEBIAN_MIRROR:-$(apt_uri debian)}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-$(apt_uri debian-security)}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

# ---------------------------------------------------------------- chroot helpers (recipes use these)

# Unmounts everything below DIR, deepest first (after an interrupted build too).
release_mounts() {
  local dir m
  dir="$(realpath -m "$1")"
  awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m"; done
}

# Removes DIR, never crossing into a mounted file system.
remove_tree() {
  [ -e "$1" ] || return 0
  release_mounts "$1"
  rm -rf --one-file-system "$1"
}

# in_chroot ROOTFS CMD...: runs CMD inside ROOTFS with /proc mounted and services blocked.
in_chroot() {
  local dir="$1" rc=0; shift
  mount -t proc proc "$dir/proc" || return 1
  printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d" && chmod 755 "$dir/usr/sbin/policy-rc.d" &&
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf" &&
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
      DEBIAN_FRONTEND=noninteractive chroot "$dir" "$@" || rc=$?
  umount "$dir/proc" || rc=1
  return $rc
}

# quietly LOG CMD...: runs CMD with its output in LOG, which is shown if CMD fails.
quietly() {
  local out="$1" rc=0; shift
  "$@" >>"$out" 2>&1 || rc=$?
  [ $rc -eq 0 ] || { tail -n 40 "$out" >&2; log "failed (exit $rc): $* (whole log: $out)"; }
  return $rc
}

# apt_install ROOTFS PACKAGE...: installs into ROOTFS without recommends; refreshes the
# package lists once if the cached ones have gone stale. Output in ROOTFS/../apt.log.
apt_install() {
  local dir="$1" out; shift
  out="$(dirname "$dir")/apt.log"
  quietly "$out" in_chroot "$dir" apt-get install -y -q "$@" ||
    { log "apt-get install failed; refreshing package lists and retrying"
      quietly "$out" in_chroot "$dir" apt-get update -q && quietly "$out" in_chroot "$dir" apt-get install -y -q "$@"; }
}

# file_is_static FILE: an ELF file that needs no shared library (static or static-pie).
file_is_static() { LC_ALL=C readelf -h "$1" >/dev/null 2>&1 && ! LC_ALL=C readelf -d "$1" | grep -q '(NEEDED)'; }

# ---------------------------------------------------------------- bases

# The Debian base: minbase bookworm with updates and security sources, upgraded, with package
# lists (so images install without an `apt-get update` each) and no documentation.
make_debian_base() {
  local dir="$OUT/base/debian.tmp" tar="$1"
  remove_tree "$dir"
  rm -f "$OUT/base/apt.log"
  log "debootstrap $SUITE from $DEBIAN_MIRROR (about 30 s)"
  debootstrap --variant=minbase "$SUITE" "$dir" "$DEBIAN_MIRROR" >/dev/null ||
    { tail -n 30 "$dir/debootstrap/debootstrap.log" >&2 2>/dev/null; die "debootstrap failed"; }
  cat > "$dir/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR $SUITE main
deb $DEBIAN_MIRROR $SUITE-updates main
deb $DEBIAN_SECURITY_MIRROR $SUITE-security main
EOF
  cat > "$dir/etc/apt/apt.conf.d/90statecraft" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Dpkg::Use-Pty "false";
EOF
  cat > "$dir/etc/dpkg/dpkg.cfg.d/90statecraft-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
EOF
  quietly "$OUT/base/apt.log" in_chroot "$dir" apt-get update -q
  quietly "$OUT/base/apt.log" in_chroot "$dir" apt-get -y -q upgrade
  in_chroot "$dir" apt-get clean
  tar --numeric-owner -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
  remove_tree "$dir"
}

# ensure_debian_base: prints the base's id (changes whenever the base is remade).
ensure_debian_base() {
  local tar="$OUT/base/debian-$SUITE-minbase.tar" stamp="$OUT/base/debian-$SUITE-minbase.stamp" h
  h="$( { declare -f make_debian_base; echo "$DEBIAN_MIRROR $DEBIAN_SECURITY_MIRROR $SUITE"; } | sha256sum | cut -c1-16)"
  if ! { [ -f "$tar" ] && [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$h" ]; }; then
    local start=$SECONDS
    make_debian_base "$tar" >&2
    log "Debian base made in $((SECONDS - start)) s: $(du -m "$tar" | cut -f1) MiB"
    printf '%s\n%s\n' "$h" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$stamp"
  fi
  sha256sum "$stamp" | cut -c1-16
}

# The static base: what Go and Rust binaries need at run time (users, name service
# configuration, CA certificates, a writable /tmp), like distroless/static.
make_static_base() {
  local dir="$1" src="$IMAGES_DIR/static-base"
  install -d -m 0755 "$dir"/{etc/ssl/certs,usr/local/bin,var/lib,home}
  install -d -m 1777 "$dir/tmp"
  install -d -m 0700 "$dir/root"
  install -d -m 0700 -o 65532 -g 65532 "$dir/home/nonroot"
  install -m 0644 "$src/passwd" "$src/group" "$src/nsswitch.conf" "$src/hosts" "$dir/etc/"
  install -m 0644 /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  : > "$dir/etc/resolv.conf"
}

# ---------------------------------------------------------------- packing

# Strips what a container never reads from a Debian root filesystem.
clean_debian_rootfs() {
  local r="$1"
  rm -f "$r/usr/sbin/policy-rc.d"
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old \
    "$r"/var/lib/dpkg/*-old "$r"/tmp/* "$r"/var/tmp/* "$r"/dev/* \
    "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* "$r"/usr/share/lintian \
    "$r"/var/cache/ldconfig/aux-cache
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  find "$r/var/log" -type f -delete
  : > "$r/etc/resolv.conf"
  # The runtime mounts its own /etc/hosts in pods; this one serves everything else.
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$r/etc/hosts"
  rm -f "$r/etc/hostname"
  : > "$r/etc/machine-id" 2>/dev/null || true
}

# pack_image ROOTFS NAME ARCHIVE: one-layer OCI image named NAME (the
# org.opencontainers.image.ref.name annotation, which `ctr images import` takes as the image
# name), configured from the recipe's ENTRYPOINT, CMD, USER_ID, WORKDIR, ENV and PORTS.
pack_image() {
  local rootfs="$1" name="$2" archive="$3" work layout a
  work="$(dirname "$rootfs")"; layout="$work/oci"
  rm -rf "$layout" "$work/layer.tar"
  (cd "$rootfs" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --numeric-owner --sort=name --xattrs --xattrs-include=security.capability \
      -cf "$work/layer.tar" -T -)
  umoci init --layout "$layout"
  umoci new --image "$layout:$name"
  umoci raw add-layer --image "$layout:$name" --history.author statecraft \
    --history.created_by "scripts/build-images.sh (deploy/images/${RECIPE_DIR##*/})" "$work/layer.tar"
  local args=(--no-history --image "$layout:$name" --author statecraft
    --config.user "$USER_ID" --config.workingdir "$WORKDIR"
    --config.env "PATH=$IMAGE_PATH" --config.label "org.opencontainers.image.title=$name")
  for a in "${ENTRYPOINT[@]}"; do args+=(--config.entrypoint "$a"); done
  for a in "${CMD[@]}"; do args+=(--config.cmd "$a"); done
  for a in "${ENV[@]}"; do args+=(--config.env "$a"); done
  for a in "${PORTS[@]}"; do args+=(--config.exposedports "$a"); done
  umoci config "${args[@]}"
  umoci gc --layout "$layout"
  tar -C "$layout" -cf "$archive.tmp" oci-layout index.json blobs
  mv "$archive.tmp" "$archive"
  rm -rf "$layout" "$work/layer.tar"
}

# ---------------------------------------------------------------- one image

# recipe_dir ID
recipe_dir() {
  if [ -f "$IMAGES_DIR/$1/recipe.sh" ]; then echo "$IMAGES_DIR/$1"
  elif [[ "$1" == statecraft-* ]]; then echo "$IMAGES_DIR/operator"
  elif [[ "$1" == *-previous && -f "$IMAGES_DIR/${1%-previous}/recipe.sh" ]]; then echo "$IMAGES_DIR/${1%-previous}"
  else die "no recipe for image $1 (expected $IMAGES_DIR/$1/recipe.sh)"; fi
}

safe_name() { echo "$1" | tr '/:@' '___'; }

# build_image ID NAME: runs in a subshell, so a recipe's variables and functions stay its own.
build_image() (
  ID="$1" NAME="$2"
  RECIPE_DIR="$(recipe_dir "$ID")"
  TAG="${NAME##*:}"
  SAFE="$(safe_name "$NAME")"
  ARCHIVE="$OUT/$SAFE.tar"
  STAMP="$OUT/$SAFE.stamp"
  WORK="$OUT/work/$SAFE"
  # Recipe defaults; a recipe overrides what it needs.
  BASE=static PACKAGES=() INPUTS=() ENTRYPOINT=() CMD=() ENV=() PORTS=()
  USER_ID=0:0 WORKDIR=/ IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  prepare() { :; }      # host side, every run: build or check the artifacts listed in INPUTS
  pre_install() { :; }  # Debian images: in the rootfs before the packages (users with fixed ids)
  populate() { :; }     # fill $ROOTFS
  # shellcheck source=/dev/null
  source "$RECIPE_DIR/recipe.sh"
  if [ -f "$RECIPE_DIR/packages" ]; then
    mapfile -t PACKAGES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$RECIPE_DIR/packages")
  fi

  prepare
  local base_id=none h
  case "$BASE" in
    debian) base_id="$(ensure_debian_base)" ;;
    static) base_id="$(cat "$IMAGES_DIR"/static-base/* /etc/ssl/certs/ca-certificates.crt | sha256sum | cut -c1-16)" ;;
    empty) ;;
    *) die "$ID: unknown BASE=$BASE" ;;
  esac
  h="$( {
    echo "$NAME $BASE $base_id"
    (cd "$RECIPE_DIR" && find . -type f | LC_ALL=C sort | xargs sha256sum)
    [ ${#INPUTS[@]} -eq 0 ] || sha256sum "${INPUTS[@]}"
    declare -f pack_image
    case "$BASE" in debian) declare -f clean_debian_rootfs ;; static) declare -f make_static_base ;; esac
    declare -f prepare pre_install populate
    declare -p PACKAGES ENTRYPOINT CMD ENV PORTS USER_ID WORKDIR IMAGE_PATH
  } | sha256sum | cut -c1-16)"
  if up_to_date "$STAMP" "$h" && [ -f "$ARCHIVE" ]; then
    log "$NAME: up to date"
    exit 0
  fi

  local start=$SECONDS
  log "$NAME: building ($BASE base, recipe ${RECIPE_DIR#"$ROOT"/})"
  remove_tree "$WORK"
  mkdir -p "$WORK"
  ROOTFS="$WORK/rootfs"
  mkdir -m 0755 "$ROOTFS"
  trap 'rc=$?; release_mounts "$WORK"; [ $rc -eq 0 ] || log "$NAME: FAILED (work directory kept: $WORK)"' EXIT
  case "$BASE" in
    debian)
      tar --numeric-owner -C "$ROOTFS" -xf "$OUT/base/debian-$SUITE-minbase.tar"
      pre_install
      [ ${#PACKAGES[@]} -eq 0 ] || { log "$NAME: apt-get install ${PACKAGES[*]}"; apt_install "$ROOTFS" "${PACKAGES[@]}"; }
      populate
      clean_debian_rootfs "$ROOTFS" ;;
    static) make_static_base "$ROOTFS"; populate ;;
    empty) populate ;;
  esac
  local size
  size="$(du -sm "$ROOTFS" | cut -f1)"
  pack_image "$ROOTFS" "$NAME" "$ARCHIVE"
  remove_tree "$WORK"
  echo "$h" > "$STAMP"
  log "$NAME: built in $((SECONDS - start)) s: rootfs $size MiB, archive $(du -m "$ARCHIVE" | cut -f1) MiB"
)

# ---------------------------------------------------------------- main

# Every KEY=VALUE of images.env whose key ends in _IMAGE, as "id name" lines.
image_list() {
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$IMAGES_DIR/images.env" |
    while IFS='=' read -r key value; do
      [[ "$key" == *_IMAGE ]] || continue
      id="${key%_IMAGE}"; id="${id,,}"; id="${id//_/-}"
      echo "$id $value"
    done
}

install_host_packages
command -v go >/dev/null || die "go not found: install Go 1.26 or newer first"
command -v cargo >/dev/null || die "cargo not found: install Rust (rustup) first"

mapfile -t ALL < <(image_list)
[ ${#ALL[@]} -gt 0 ] || die "no images in $IMAGES_DIR/images.env"
declare -A WANT=()
for a in "$@"; do WANT[$a]=1; done
for line in "${ALL[@]}"; do
  read -r id name <<<"$line"
  if [ $# -gt 0 ]; then [ -n "${WANT[$id]:-}" ] || continue; unset "WANT[$id]"; fi
  build_image "$id" "$name"
done
[ ${#WANT[@]} -eq 0 ] || die "unknown image id(s): ${!WANT[*]} (known: $(printf '%s\n' "${ALL[@]}" | cut -d' ' -f1 | tr '\n' ' '))"
log "images in $OUT: $(cd "$OUT" && du -ch ./*.tar | tail -n1 | cut -f1) in total"
