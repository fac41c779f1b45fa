#!/usr/bin/env bash
# Tests scripts/release-images.sh on a real Docker engine: builds the release images, then
# checks each one the way a cluster would use it, and that a push without credentials is
# skipped while a refused one fails.
#
#   scripts/test-release-images.sh                    every operator
#   scripts/test-release-images.sh statecraft-mysql   some
#
# Docker comes from scripts/dockerd.sh (installed and started if need be, and stopped again
# if this test started it). The images are tagged under a prefix no registry serves,
# localhost/statecraft-release-test, and removed at the end; nothing is pushed anywhere.
# Per operator it checks:
#   - `docker run --rm <image> --help` prints the operator's usage, and `crd` its CRDs;
#   - the config: user 65532:65532, entrypoint /usr/local/bin/<op>, cmd run, workdir
#     /home/nonroot, ports 8080 and 8081, the version label equal to the version tag, and
#     the version and dev tags on the same image;
#   - the process really runs as 65532:65532 (`copy-self` writes into a mounted directory,
#     and the file's owner is the process's uid), and the copy is the binary itself;
#   - the binary in the image is byte-identical to the one the offline build produced
#     ($CACHE/images/bin/<op>) and to the one in its offline image archive;
#   - the image's files (paths, modes, owners, sizes) are those of the offline image.
# Run as root (as release-images.sh).
source "$(dirname "$0")/lib.sh"
shopt -s inherit_errexit

fail() { printf '\033[1;31mtest-release-images: FAIL: %s\033[0m\n' "$*" >&2; exit 1; }
ok() { printf '  ok  %s\n' "$*" >&2; }

PREFIX=localhost/statecraft-release-test
# For the refused push: a registry address where nothing listens (port 9, discard).
REFUSED_PREFIX=127.0.0.1:9/statecraft-release-test
OPS=("$@")
[ ${#OPS[@]} -gt 0 ] || OPS=(statecraft-mysql statecraft-etcd statecraft-kafka)
start=$SECONDS

TMP="$(mktemp -d "${TMPDIR:-/tmp}/statecraft-release-test.XXXXXX")"
started_here=false
cleanup() {
  local rc=$? refs
  if [ -n "${DOCKER_HOST:-}" ]; then
    refs="$(docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null |
      grep -E "^($PREFIX|$REFUSED_PREFIX)/" || true)"
    # shellcheck disable=SC2086 # one reference per word
    [ -z "$refs" ] || docker rmi --force $refs >/dev/null || true
  fi
  rm -rf "$TMP"
  if $started_here; then "$ROOT/scripts/dockerd.sh" stop || true; fi
  [ $rc -ne 0 ] || log "test-release-images: passed in $((SECONDS - start)) s (${OPS[*]})"
}
trap cleanup EXIT

# Docker: the caller's when it answers, else scripts/dockerd.sh's (stopped again at the end
# if it was not running before).
if ! { command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; } &&
   ! "$ROOT/scripts/dockerd.sh" status; then
  started_here=true
fi
DOCKER_HOST="$("$ROOT/scripts/dockerd.sh" start)"
export DOCKER_HOST
log "docker at $DOCKER_HOST ($((SECONDS - start)) s)"

# No credentials may leak in from the caller: this run must build and skip the push.
unset STATECRAFT_REGISTRY_USER STATECRAFT_REGISTRY_PASSWORD STATECRAFT_IMAGE_VERSION

# ---------------------------------------------------------------- build, push skipped

t=$SECONDS
STATECRAFT_REGISTRY="$PREFIX" "$ROOT/scripts/release-images.sh" "${OPS[@]}" 2>&1 | tee "$TMP/release.log" >&2 ||
  fail "release-images.sh failed (see above)"
grep -q 'push skipped: no registry credentials (set STATECRAFT_REGISTRY_USER and STATECRAFT_REGISTRY_PASSWORD' "$TMP/release.log" ||
  fail "release-images.sh did not say the push was skipped"
ok "release-images.sh built ${OPS[*]} and skipped the push ($((SECONDS - t)) s)"

# ---------------------------------------------------------------- each image

# "mode uid/gid size path" of every entry of the layer tars named on stdin, de-duplicated
# (directories appear in several layers); mtimes differ between the builds by design.
listing() {
  local layer
  while read -r layer; do
    tar --numeric-owner -tvf "$layer" | awk '{ p = $6; for (i = 7; i <= NF; i++) p = p " " $i;
      sub(/^\.\//, "", p); sub(/\/$/, "", p); if (p != "" && p != ".") print $1, $2, $3, p }'
  done | LC_ALL=C sort -u
}

for op in "${OPS[@]}"; do
  log "checking $PREFIX/$op"
  version="$(docker image inspect --format '{{index .Config.Labels "org.opencontainers.image.version"}}' "$PREFIX/$op:dev")"
  image="$PREFIX/$op:$version"
  [ "$(docker image inspect --format '{{.Id}}' "$image")" = "$(docker image inspect --format '{{.Id}}' "$PREFIX/$op:dev")" ] ||
    fail "$image and :dev are different images"
  ok "$image and $PREFIX/$op:dev are one image"

  help="$(docker run --rm --network none "$image" --help)" || fail "docker run $image --help failed"
  grep -q "^Usage: $op <COMMAND>" <<<"$help" || fail "$image --help: no 'Usage: $op <COMMAND>' in: $help"
  ok "docker run --rm $image --help: $(grep '^Usage' <<<"$help")"
  crd="$(docker run --rm --network none "$image" crd)" || fail "docker run $image crd failed"
  grep -q '^kind: CustomResourceDefinition$' <<<"$crd" || fail "$image crd printed no CustomResourceDefinition"
  ok "docker run --rm $image crd: $(grep -c '^kind: CustomResourceDefinition$' <<<"$crd") CRDs, $(wc -l <<<"$crd") lines"

  config="$(docker image inspect --format '{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{.Config.WorkingDir}}|{{json .Config.ExposedPorts}}' "$image")"
  want="65532:65532|[\"/usr/local/bin/$op\"]|[\"run\"]|/home/nonroot|{\"8080/tcp\":{},\"8081/tcp\":{}}"
  [ "$config" = "$want" ] || fail "$image config: $config, expected $want"
  ok "docker inspect: user, entrypoint, cmd, workdir, ports: $config"

  # The process's own uid: copy-self writes the binary into a directory everyone may write
  # to, and the file belongs to whoever wrote it.
  out="$TMP/out-$op"
  install -d -m 1777 "$out"
  docker run --rm --network none -v "$out:/out" "$image" copy-self /out/probe >/dev/null ||
    fail "docker run $image copy-self failed"
  owner="$(stat -c %u:%g "$out/probe")"
  [ "$owner" = 65532:65532 ] || fail "$image ran as $owner, expected 65532:65532"
  ok "the container's process ran as $owner"

  # The binary: from the image's file system, against the offline build's and its archive's.
  cid="$(docker create "$image")"
  docker cp "$cid:/usr/local/bin/$op" - | tar -x -C "$out" || { docker rm "$cid" >/dev/null; fail "docker cp from $image failed"; }
  docker rm "$cid" >/dev/null
  cmp -s "$out/$op" "$CACHE/images/bin/$op" || fail "$image: /usr/local/bin/$op differs from $CACHE/images/bin/$op"
  cmp -s "$out/probe" "$out/$op" || fail "$image: copy-self wrote something other than its binary"
  archive="$CACHE/images/docker.io_statecraft_${op}_dev.tar"
  mkdir "$TMP/oci-$op"
  tar -xf "$archive" -C "$TMP/oci-$op"
  # The offline image: index.json -> manifest -> its one layer.
  manifest="$(grep -oE 'sha256:[0-9a-f]{64}' "$TMP/oci-$op/index.json" | head -n1)"
  layer="$(grep -oE '"layers":\[[^]]*' "$TMP/oci-$op/blobs/sha256/${manifest#sha256:}" | grep -oE 'sha256:[0-9a-f]{64}' | head -n1)"
  tar -xzf "$TMP/oci-$op/blobs/sha256/${layer#sha256:}" -O "usr/local/bin/$op" | cmp -s - "$out/$op" ||
    fail "$image: /usr/local/bin/$op differs from the one in $archive"
  ok "/usr/local/bin/$op is byte-identical to $CACHE/images/bin/$op and to the offline image's ($(sha256sum "$out/$op" | cut -c1-16))"

  # The files: the docker image's layers against the offline image's one layer.
  docker save "$image" -o "$TMP/save-$op.tar"
  mkdir "$TMP/save-$op"
  tar -xf "$TMP/save-$op.tar" -C "$TMP/save-$op"
  grep -o '"Layers":\[[^]]*\]' "$TMP/save-$op/manifest.json" | grep -o '"[^"]*"' | tail -n +2 | tr -d '"' |
    sed "s|^|$TMP/save-$op/|" | listing > "$TMP/docker-$op.list"
  echo "$TMP/oci-$op/blobs/sha256/${layer#sha256:}" | listing > "$TMP/offline-$op.list"
  diff -u "$TMP/offline-$op.list" "$TMP/docker-$op.list" >&2 ||
    fail "$image: its files differ from the offline image's (- offline, + docker)"
  ok "files as in the offline image: $(wc -l < "$TMP/docker-$op.list") entries (paths, modes, owners, sizes)"
  rm -rf "$out" "$TMP/oci-$op" "$TMP/save-$op" "$TMP/save-$op.tar"
done

# ---------------------------------------------------------------- a refused push fails

# Credentials for a registry where nothing listens: the script must fail, and never print
# the password. STATECRAFT_ALLOW_DIRTY=1, so that a modified tree (the usual state while
# developing) also gets as far as the login.
t=$SECONDS
password="not-a-password-$RANDOM$RANDOM"
rc=0
STATECRAFT_REGISTRY="$REFUSED_PREFIX" STATECRAFT_REGISTRY_USER=statecraft-test STATECRAFT_REGISTRY_PASSWORD="$password" \
  STATECRAFT_ALLOW_DIRTY=1 "$ROOT/scripts/release-images.sh" "${OPS[0]}" > "$TMP/refused.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || { cat "$TMP/refused.log" >&2; fail "release-images.sh exited 0 although the push could not happen"; }
! grep -q 'push skipped' "$TMP/refused.log" || fail "release-images.sh said 'push skipped' with credentials given"
! grep -qF "$password" "$TMP/refused.log" || fail "release-images.sh printed the registry password"
# (Someone committing to this checkout during the build stops it earlier, also a failure.)
expected="docker login to ${REFUSED_PREFIX%%/*} as statecraft-test failed|the checkout changed during the build"
grep -qE "$expected" "$TMP/refused.log" || { cat "$TMP/refused.log" >&2; fail "release-images.sh failed, but not with: $expected"; }
ok "with credentials for an unreachable registry: exit $rc, $(grep -oE "$expected" "$TMP/refused.log" | head -n1) ($((SECONDS - t)) s)"
