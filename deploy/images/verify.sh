#!/usr/bin/env bash
# Checks the built images end to end, without touching any other containerd: starts a
# throw-away containerd (its own config, root, state and socket under $IMGTEST_DIR, default
# /tmp/imgtest-containerd; its own mount namespace with a private /run, so shim sockets,
# runc state and FIFOs stay out of the host's /run/containerd), imports every image with
# scripts/import-images.sh, runs each one, then stops it and removes the directory.
#
#   deploy/images/verify.sh          (as root, after scripts/build-images.sh)
source "$(dirname "$0")/../../scripts/lib.sh"
source "$ROOT/deploy/images/images.env"

T="${IMGTEST_DIR:-/tmp/imgtest-containerd}"
SOCK="$T/containerd.sock"
PID=""
fail() { printf '\033[1;31mverify: %s\033[0m\n' "$*" >&2; exit 1; }
trap 'printf "\033[1;31mverify: failed (exit %s) at line %s: %s\033[0m\n" "$?" "$LINENO" "$BASH_COMMAND" >&2' ERR

cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    # Shims outlive containerd: stop every task and delete every container first.
    for c in $(cr containers ls -q 2>/dev/null); do
      cr tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
      for _ in $(seq 20); do cr tasks ls 2>/dev/null | grep -q "^$c .*RUNNING" || break; sleep 0.2; done
      cr tasks delete -f "$c" >/dev/null 2>&1 || true
      cr containers delete "$c" >/dev/null 2>&1 || true
    done
    kill "$PID"
    for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$PID" 2>/dev/null; then kill -9 "$PID"; fi
  fi
  # Every test container ran in cgroup /imgtest/<id>; the tasks' removal took the leaves.
  local d
  for d in /sys/fs/cgroup/*/imgtest /sys/fs/cgroup/imgtest; do
    [ -d "$d" ] || continue
    find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "$d" 2>/dev/null || echo "verify: could not remove cgroup $d" >&2
  done
  # The mounts lived in containerd's own mount namespace, gone with it; check anyway.
  if awk -v d="$T" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    fail "mounts left under $T; not removing it"
  fi
  rm -rf --one-file-system "$T"
}

# c CMD...: runs CMD in containerd's mount namespace (ctr's FIFOs must be where the shim looks).
c() { nsenter --target "$PID" --mount -- "$@"; }
cr() { c ctr --address "$SOCK" --namespace k8s.io "$@"; }
# run IMAGE ID CMD...: runs a container to completion, printing its output.
run() { local img="$1" id="$2"; shift 2; cr run --rm --cgroup "/imgtest/$id" "$img" "imgtest-$id" "$@"; }
# start IMAGE ID [CMD...]: starts a container in the background, output in $T/ID.log (a
# detached task whose output nobody reads blocks once the pipe is full).
start() {
  local img="$1" id="$2"; shift 2
  cr run -d --cgroup "/imgtest/$id" --log-uri "file://$T/$id.log" "$img" "imgtest-$id" "$@" >/dev/null
}
# stop ID: kills and removes a background container.
stop() {
  cr tasks kill -s SIGKILL "imgtest-$1" >/dev/null 2>&1 || true
  for _ in $(seq 20); do cr tasks ls | grep -q "^imgtest-$1 .*RUNNING" || break; sleep 0.2; done
  cr tasks delete "imgtest-$1" >/dev/null
  cr containers delete "imgtest-$1"
}
# running ID: whether the container's task runs.
running() { cr tasks ls | grep -q "^imgtest-$1 .*RUNNING"; }
ok() { printf '\033[1;32m  ok\033[0m %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || fail "run as root"
[ ! -e "$T" ] || fail "$T exists (an earlier run still going?); remove it first"
mkdir -p "$T"
trap cleanup EXIT
cat > "$T/config.toml" <<EOF
version = 2
root = "$T/root"
state = "$T/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
EOF
setsid unshare --mount --propagation private -- sh -c \
  "mount -t tmpfs -o mode=0755 tmpfs /run && exec containerd --config '$T/config.toml'" \
  >"$T/containerd.log" 2>&1 &
PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.2; done
[ -S "$SOCK" ] || { cat "$T/containerd.log" >&2; fail "containerd did not start"; }
log "throw-away containerd $PID at $SOCK"

start=$SECONDS
CONTAINERD_ADDRESS="$SOCK" "$ROOT/scripts/import-images.sh"
log "import took $((SECONDS - start)) s; again (must skip everything):"
CONTAINERD_ADDRESS="$SOCK" "$ROOT/scripts/import-images.sh" 2>&1 | grep -q '0 imported' || fail "second import was not a no-op"
cr images ls

log "pause: starts, keeps running, exits 0 on SIGTERM"
start "$PAUSE_IMAGE" pause
sleep 1
running pause || fail "pause is not running"
cr tasks kill -s SIGTERM imgtest-pause
for _ in $(seq 25); do running pause || break; sleep 0.2; done
running pause && fail "pause did not stop on SIGTERM"
cr tasks delete imgtest-pause || fail "pause did not exit 0"   # ctr fails on a non-zero exit status
cr containers delete imgtest-pause
ok "pause"

log "mariadb"
run "$MARIADB_IMAGE" mariadb-v mariadbd --version
run "$MARIADB_IMAGE" mariadb-id sh -c 'id; mariadb --version; mariadb-backup --version 2>&1 | head -n1; ls -ld /var/lib/mysql'
run "$MARIADB_IMAGE" mariadb-start sh -ec '
  mariadb-install-db --user=mysql --datadir=/tmp/data --skip-test-db >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
  mariadbd --datadir=/tmp/data --socket=/tmp/mysqld.sock --skip-networking --pid-file=/tmp/mysqld.pid --log-error=/tmp/err.log &
  sleep 2; for i in $(seq 30); do mariadb -S /tmp/mysqld.sock -N -e "select concat(\"server \", version(), \" as \", current_user())" && exit 0; sleep 1; done
  cat /tmp/err.log; exit 1'
ok "mariadb"

log "mysqld-exporter"
run "$MYSQLD_EXPORTER_IMAGE" mysqld-exporter-v /bin/mysqld_exporter --version
ok "mysqld-exporter"

log "etcd"
run "$ETCD_IMAGE" etcd-v /usr/local/bin/etcd --version
run "$ETCD_IMAGE" etcdctl-v etcdctl version
run "$ETCD_IMAGE" etcdutl-v etcdutl version
ok "etcd"

log "coredns: runs as 65532 and binds port 53 (file capability), answers a query"
run "$COREDNS_IMAGE" coredns-v /coredns -version
start "$COREDNS_IMAGE" coredns
sleep 2
running coredns || { cat "$T/coredns.log" >&2; fail "coredns is not running"; }
cpid="$(cr tasks ls | awk '$1 == "imgtest-coredns" { print $2 }')"
# A tools container in coredns' network namespace asks it (the default config is whoami).
cr run --rm --cgroup /imgtest/dig --with-ns "network:/proc/$cpid/ns/net" "$TOOLS_IMAGE" imgtest-dig \
  dig +time=2 +tries=3 @127.0.0.1 whoami.example A | tee "$T/dig.out"
# whoami answers with the asker's address in the additional section.
grep -q 'status: NOERROR' "$T/dig.out" && grep -qE 'whoami\.example\.\s+0\s+IN\s+A\s+127\.0\.0\.1' "$T/dig.out" ||
  { cat "$T/coredns.log" >&2; fail "coredns did not answer"; }
grep -qE '^Uid:\s+65532\s' "/proc/$cpid/status" || fail "coredns does not run as 65532"
stop coredns
ok "coredns"

log "tools"
run "$TOOLS_IMAGE" tools sh -c 'mariadb --version && etcdctl version && dig -v && curl --version | head -n1 && ip -V && nc -h 2>&1 | head -n1 && jq --version'
ok "tools"

log "operators"
for img in "$STATECRAFT_MYSQL_IMAGE" "$STATECRAFT_ETCD_IMAGE" "$STATECRAFT_KAFKA_IMAGE" "$STATECRAFT_ECHO_IMAGE"; do
  bin="${img##*/}"; bin="${bin%%:*}"
  run "$img" "$bin-help" "/usr/local/bin/$bin" --help
  run "$img" "$bin-rbac" "/usr/local/bin/$bin" rbac --namespace imgtest | grep -q 'kind: Role' || fail "$bin rbac"
done
# Static glibc resolves names itself (files and dns are built into libc since 2.34): a
# static Rust probe, built like the operators, resolves localhost from the image's /etc/hosts.
if command -v rustc >/dev/null; then
  printf '%s\n' 'fn main() { for h in std::env::args().skip(1) { use std::net::ToSocketAddrs;' \
    'let a: Vec<_> = (h.as_str(), 80).to_socket_addrs().expect("lookup").collect(); println!("{h} -> {a:?}"); } }' > "$T/probe.rs"
  rustc -C target-feature=+crt-static --target x86_64-unknown-linux-gnu -o "$T/probe" "$T/probe.rs"
  cr run --rm --cgroup /imgtest/probe --mount "type=bind,src=$T/probe,dst=/probe,options=rbind:ro" \
    "$STATECRAFT_MYSQL_IMAGE" imgtest-probe /probe localhost
fi
ok "operators"

log "kafka: format the storage and start a single-node KRaft broker+controller"
run "$KAFKA_IMAGE" kafka-java java -version
start "$KAFKA_IMAGE" kafka sh -ec '
  kafka-storage format --standalone -t "$(kafka-storage random-uuid)" -c /opt/kafka/config/server.properties
  exec env KAFKA_HEAP_OPTS="-Xmx512M -Xms512M" kafka-server-start /opt/kafka/config/server.properties'
# (log4j's "Could not determine local host name" comes from ctr not putting the container's
# host name in /etc/hosts; a pod's /etc/hosts has it.)
up=""
for i in $(seq 30); do
  if cr tasks exec --exec-id "probe$i" imgtest-kafka timeout 30 kafka-metadata-quorum \
      --bootstrap-server localhost:9092 describe --status >"$T/quorum.out" 2>"$T/quorum.err"; then up=1; break; fi
  running kafka || break
  sleep 2
done
[ -n "$up" ] || { tail -n 30 "$T/kafka.log" "$T/quorum.err" >&2; fail "kafka did not come up"; }
cat "$T/quorum.out"
grep -q 'LeaderId' "$T/quorum.out" || fail "kafka has no quorum leader"
cr tasks exec --exec-id topic imgtest-kafka sh -ec '
  kafka-topics --bootstrap-server localhost:9092 --create --topic imgtest --partitions 1 --replication-factor 1
  echo hello-from-imgtest | kafka-console-producer --bootstrap-server localhost:9092 --topic imgtest
  kafka-console-consumer --bootstrap-server localhost:9092 --topic imgtest --from-beginning --max-messages 1 --timeout-ms 30000' \
  2>"$T/roundtrip.err" | tee "$T/consume.out"
grep -q hello-from-imgtest "$T/consume.out" || { tail -n 30 "$T/roundtrip.err" >&2; fail "kafka round trip failed"; }
stop kafka
ok "kafka"

log "all images verified"
