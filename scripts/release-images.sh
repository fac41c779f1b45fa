#!/usr/bin/env bash
# Builds the operator images a real cluster pulls, with Docker, from
# deploy/images/operator/Dockerfile, and pushes them when registry credentials are given.
#
#   scripts/release-images.sh                    every operator (statecraft-mysql, -etcd, -kafka)
#   scripts/release-images.sh statecraft-etcd    some (ids as in images.env; "etcd" works too)
#   make release-images
#
# Tags, for each operator: $STATECRAFT_REGISTRY/statecraft-<op>:<version> and :dev.
# <version> is Cargo.toml's workspace version (0.1.0) when HEAD carries its tag (v0.1.0 or
# 0.1.0) and no tracked file is modified; otherwise <version>-<git short sha> (0.1.0-d248b2d),
# with -dirty appended when tracked files are modified. A version tag names one build of one
# commit: a modified tree is not pushed (unless STATECRAFT_ALLOW_DIRTY=1), and a version tag
# the registry already holds is not pushed again (only :dev moves).
#
# Environment:
#   STATECRAFT_REGISTRY            registry and namespace; default docker.io/statecraft, the
#                                  prefix of the operator names in deploy/images/images.env
#   STATECRAFT_REGISTRY_USER,      both set: `docker login --password-stdin` (into a throw-away
#   STATECRAFT_REGISTRY_PASSWORD   docker config, deleted on exit) and push; neither: build
#                                  only, "push skipped", exit 0; one alone is an error
#   STATECRAFT_IMAGE_VERSION       this version tag instead of the computed one
#   STATECRAFT_ALLOW_DIRTY=1       push a build of a modified tree anyway (its tag ends in
#                                  -dirty; like cargo publish --allow-dirty)
#   DOCKER_HOST                    the docker to use; when no docker answers, scripts/dockerd.sh
#                                  starts one, and this script stops it again when done
#
# The binaries are not compiled here: scripts/build-images.sh builds them (its one static
# cargo build of every operator) into $CACHE/images/bin and packs the offline images from
# the same files, so the image pushed and the image the local cluster tests hold the same
# bytes. Run as root (build-images.sh and dockerd need it).
source "$(dirname "$0")/lib.sh"
shopt -s inherit_errexit

die() { printf '\033[1;31mrelease-images: %s\033[0m\n' "$*" >&2; exit 1; }

IMAGES_DIR="$ROOT/deploy/images"
DOCKERFILE="$IMAGES_DIR/operator/Dockerfile"
REGISTRY="${STATECRAFT_REGISTRY:-docker.io/statecraft}"
REGISTRY="${REGISTRY%/}"
REG_USER="${STATECRAFT_REGISTRY_USER:-}"
REG_PASSWORD="${STATECRAFT_REGISTRY_PASSWORD:-}"
# Context files get fixed modes whatever the caller's umask; the layers depend on them.
umask 022

# ---------------------------------------------------------------- what to build

# The operator ids of images.env: STATECRAFT_<OP>_IMAGE, except the shared library's echo
# operator (a test fixture, never released).
operator_ids() {
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$IMAGES_DIR/images.env" |
    while IFS='=' read -r key _; do
      [[ "$key" == STATECRAFT_*_IMAGE ]] || continue
      id="${key%_IMAGE}"; id="${id,,}"; id="${id//_/-}"
      [ "$id" = statecraft-echo ] || echo "$id"
    done
}
mapfile -t KNOWN < <(operator_ids)
IDS=()
for a in "$@"; do
  case "$a" in -h|--help) sed -n '2,30p' "$0"; exit 0 ;; esac
  [[ "$a" == statecraft-* ]] || a="statecraft-$a"
  printf '%s\n' "${KNOWN[@]}" | grep -qx -- "$a" || die "unknown operator $a (known: ${KNOWN[*]})"
  IDS+=("$a")
done
[ ${#IDS[@]} -gt 0 ] || IDS=("${KNOWN[@]}")
for id in "${IDS[@]}"; do
  grep -qx "FROM operator AS $id" "$DOCKERFILE" ||
    die "$DOCKERFILE has no stage for $id: add 'FROM operator AS $id' with its ENTRYPOINT and CMD"
done

# ---------------------------------------------------------------- version and labels

# KEY of Cargo.toml's [workspace.package] (simple `key = "value"` lines, as that table has).
workspace_field() {
  sed -n '/^\[workspace\.package\]/,/^\[/{s/^'"$1"'[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p}' "$ROOT/Cargo.toml"
}
# The description of the cargo package named ID (its Cargo.toml under operators/).
package_description() {
  local manifest
  manifest="$(grep -lx "name = \"$1\"" "$ROOT"/operators/*/Cargo.toml | head -n1)" ||
    die "no operators/*/Cargo.toml with name = \"$1\""
  sed -n 's/^description[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$manifest" | head -n1
}

CARGO_VERSION="$(workspace_field version)"
[ -n "$CARGO_VERSION" ] || die "no version in [workspace.package] of $ROOT/Cargo.toml"
LICENSES="$(workspace_field license)"
SOURCE="$(workspace_field repository)"
REVISION="$(git -C "$ROOT" rev-parse HEAD)"
SHORT_SHA="$(git -C "$ROOT" rev-parse --short HEAD)"
# Tracked files only: an untracked file is not part of any build until a tracked one uses it.
DIRTY=false
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] || DIRTY=true
release_tag="" other_tag=""
while read -r t; do
  case "$t" in
    "v$CARGO_VERSION"|"$CARGO_VERSION") release_tag="$t" ;;
    v[0-9]*|[0-9]*) other_tag="$t" ;;
  esac
done < <(git -C "$ROOT" tag --points-at HEAD)
# A version tag on HEAD that disagrees with Cargo.toml is a release mistake, not a dev build.
[ -n "$release_tag" ] || [ -z "$other_tag" ] ||
  die "HEAD is tagged $other_tag but Cargo.toml's workspace version is $CARGO_VERSION"
if [ -n "$release_tag" ] && ! $DIRTY; then VERSION="$CARGO_VERSION"
else VERSION="$CARGO_VERSION-$SHORT_SHA"; ! $DIRTY || VERSION+="-dirty"; fi
VERSION="${STATECRAFT_IMAGE_VERSION:-$VERSION}"
[[ "$VERSION" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "not a valid image tag: $VERSION"
[ "$VERSION" != dev ] || die "the version tag may not be 'dev' (that is the moving tag)"

# Credentials: both or neither, decided before anything is built.
PUSH=false
if [ -n "$REG_USER" ] && [ -n "$REG_PASSWORD" ]; then PUSH=true
elif [ -n "$REG_USER" ] || [ -n "$REG_PASSWORD" ]; then
  die "set both STATECRAFT_REGISTRY_USER and STATECRAFT_REGISTRY_PASSWORD, or neither"
fi
# A modified tree has no commit that holds what was built, so its tag could name anything.
if $PUSH && $DIRTY && [ "${STATECRAFT_ALLOW_DIRTY:-}" != 1 ]; then
  die "refusing to push a build of a modified tree ($VERSION): commit, build without credentials, or set STATECRAFT_ALLOW_DIRTY=1"
fi
log "release images ${IDS[*]}: $REGISTRY/<op>:$VERSION and :dev"

# ---------------------------------------------------------------- docker

WORK="$(mktemp -d "${TMPDIR:-/tmp}/statecraft-release.XXXXXX")"
STOP_DOCKERD=false
cleanup() {
  rm -rf "$WORK"
  if $STOP_DOCKERD; then "$ROOT/scripts/dockerd.sh" stop || true; fi
}
trap cleanup EXIT

# The caller's docker when it answers; else scripts/dockerd.sh's, which is stopped again at
# the end if this run started it (it keeps its images in /var/lib/statecraft-docker).
if ! { command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; }; then
  "$ROOT/scripts/dockerd.sh" status || STOP_DOCKERD=true
  DOCKER_HOST="$("$ROOT/scripts/dockerd.sh" start)"
  export DOCKER_HOST
fi

# ---------------------------------------------------------------- binaries

# build-images.sh's prepare step runs the one cargo build and strips into $CACHE/images/bin;
# packing the offline images too is a few seconds and keeps them the same build.
"$ROOT/scripts/build-images.sh" "${IDS[@]}"

# The binaries are what the working tree held during the build; in a checkout others commit
# to, that need not be the commit the version and labels name. Such images are never pushed.
if [ "$(git -C "$ROOT" rev-parse HEAD)" != "$REVISION" ] ||
   { ! $DIRTY && [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; }; then
  $PUSH && die "the checkout changed during the build (HEAD was $SHORT_SHA): not pushing; run again"
  log "warning: the checkout changed during the build (HEAD was $SHORT_SHA): the tags and labels may not name what was built"
fi

# ---------------------------------------------------------------- build

# The build context of operator ID (see the Dockerfile's header): the static base as
# build-images.sh's make_static_base lays it out, the home directory, the binary. Every file
# gets one fixed time (1970-01-01, as in distroless), so the static base's layer comes out as
# the same blob for every operator and every release while its files stay the same, and a
# registry stores it once.
prepare_context() {
  local id="$1" ctx="$2"
  install -d -m 0755 "$ctx"/rootfs/{etc/ssl/certs,usr/local/bin,var/lib,home} "$ctx/bin" "$ctx/home"
  install -d -m 1777 "$ctx/rootfs/tmp"
  install -d -m 0700 "$ctx/rootfs/root" "$ctx/home/nonroot"
  install -m 0644 "$IMAGES_DIR"/static-base/{passwd,group,nsswitch.conf,hosts} "$ctx/rootfs/etc/"
  install -m 0644 /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
  : > "$ctx/rootfs/etc/resolv.conf"
  install -m 0755 "$CACHE/images/bin/$id" "$ctx/bin/$id"
  install -m 0644 "$DOCKERFILE" "$ctx/Dockerfile"
  find "$ctx" -exec touch -h -d @0 {} +
}

for id in "${IDS[@]}"; do
  image="$REGISTRY/$id"
  ctx="$WORK/$id"
  prepare_context "$id" "$ctx"
  description="$(package_description "$id")"
  log "$image:$VERSION: docker build"
  # --target: the operator's stage, the one that names its binary as ENTRYPOINT.
  docker build --quiet --target "$id" \
    --build-arg OPERATOR="$id" --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
    --build-arg SOURCE="$SOURCE" --build-arg LICENSES="$LICENSES" \
    --build-arg DESCRIPTION="$description" \
    --tag "$image:$VERSION" --tag "$image:dev" "$ctx" >/dev/null
  rm -rf "$ctx"
  # The legacy builder also builds the stages before the target (the other operators'
  # entrypoints over this binary) and leaves them as untagged images: remove those, and only
  # those (dangling, and labelled with this operator).
  docker image prune --force --filter "label=org.opencontainers.image.title=$id" >/dev/null
  # Not pushed unless it starts: the binary runs (as its user, without a network).
  docker run --rm --network none "$image:$VERSION" --help >/dev/null ||
    die "$image:$VERSION: \`docker run --rm $image:$VERSION --help\` failed"
  user="$(docker image inspect --format '{{.Config.User}}' "$image:$VERSION")"
  [ "$user" = 65532:65532 ] || die "$image:$VERSION: user is '$user', expected 65532:65532"
  log "$image:$VERSION: $(docker image inspect --format '{{.Id}} {{.Size}}' "$image:$VERSION" |
    awk '{ printf "%s, %.1f MB", substr($1, 8, 12), $2 / 1e6 }')"
done

# ---------------------------------------------------------------- push

if ! $PUSH; then
  log "push skipped: no registry credentials (set STATECRAFT_REGISTRY_USER and STATECRAFT_REGISTRY_PASSWORD to push to $REGISTRY)"
  exit 0
fi

# The registry host, as docker reads an image name: the first component when it looks like a
# host (a dot, a port or localhost), else Docker Hub.
first="${REGISTRY%%/*}"
if [[ "$REGISTRY" == */* && ( "$first" == *.* || "$first" == *:* || "$first" == localhost ) ]]; then
  REGISTRY_HOST="$first"
else
  REGISTRY_HOST=docker.io
fi

# Log in with a throw-away docker config, so the credentials never land in the caller's
# ~/.docker/config.json (or its credential helper). The caller's contexts are copied and the
# current one pinned, so the same docker is still used.
if [ -z "${DOCKER_HOST:-}" ] && [ -z "${DOCKER_CONTEXT:-}" ]; then
  DOCKER_CONTEXT="$(docker context inspect --format '{{.Name}}' 2>/dev/null || echo default)"
  [ "$DOCKER_CONTEXT" = default ] && unset DOCKER_CONTEXT || export DOCKER_CONTEXT
fi
callers_config="${DOCKER_CONFIG:-$HOME/.docker}"
export DOCKER_CONFIG="$WORK/docker-config"
install -d -m 0700 "$DOCKER_CONFIG"
[ ! -d "$callers_config/contexts" ] || cp -a "$callers_config/contexts" "$DOCKER_CONFIG/"
echo '{}' > "$DOCKER_CONFIG/config.json"

log "docker login $REGISTRY_HOST as $REG_USER"
printf '%s' "$REG_PASSWORD" | docker login --username "$REG_USER" --password-stdin "$REGISTRY_HOST" >&2 ||
  die "docker login to $REGISTRY_HOST as $REG_USER failed"

for id in "${IDS[@]}"; do
  image="$REGISTRY/$id"
  # Version tags are immutable: one the registry already holds stays as it is. (`manifest
  # inspect` needs the experimental switch on docker 20.10 clients; newer ones ignore it.)
  if DOCKER_CLI_EXPERIMENTAL=enabled docker manifest inspect "$image:$VERSION" >/dev/null 2>&1; then
    log "$image:$VERSION is already in the registry: not pushed again"
  else
    log "docker push $image:$VERSION"
    docker push "$image:$VERSION" >&2 || die "docker push $image:$VERSION failed"
  fi
  log "docker push $image:dev"
  docker push "$image:dev" >&2 || die "docker push $image:dev failed"
done
log "pushed to $REGISTRY: ${IDS[*]} ($VERSION and dev)"
