# docker.io/statecraft/tools: the e2e suite's client pod. Debian packages (see packages) plus
# etcdctl from $CACHE/bin. CMD sleeps forever so a test can `kubectl exec` into it.
BASE=debian
CMD=(sleep infinity)
ENV=(LANG=C.UTF-8)
INPUTS=("$BIN/etcdctl")

prepare() {
  [ -x "$BIN/etcdctl" ] || { log "etcdctl missing from $BIN: running scripts/build-kube.sh"; "$ROOT/scripts/build-kube.sh"; }
}

populate() {
  install -m 0755 "$BIN/etcdctl" "$ROOTFS/usr/local/bin/etcdctl"
}
