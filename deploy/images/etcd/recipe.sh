# gcr.io/etcd-development/etcd: the etcd, etcdctl and etcdutl that scripts/build-kube.sh builds
# (static Go binaries) on the static base, laid out like the upstream image: binaries in
# /usr/local/bin, CMD etcd, working directory /var/lib/etcd, root.
BASE=static
CMD=(/usr/local/bin/etcd)
WORKDIR=/var/lib/etcd
PORTS=(2379/tcp 2380/tcp)
INPUTS=("$BIN/etcd" "$BIN/etcdctl" "$BIN/etcdutl")

prepare() {
  if [ ! -x "$BIN/etcd" ] || [ ! -x "$BIN/etcdctl" ] || [ ! -x "$BIN/etcdutl" ]; then
    log "etcd binaries missing from $BIN: running scripts/build-kube.sh"
    "$ROOT/scripts/build-kube.sh"
  fi
  local v
  v="$("$BIN/etcd" --version | sed -n 's/^etcd Version: //p')"
  [ "v$v" = "$TAG" ] || die "$BIN/etcd is $v, but the image is tagged $TAG"
  local f
  for f in "${INPUTS[@]}"; do
    file_is_static "$f" || die "$f is not statically linked"
  done
}

populate() {
  install -m 0755 "${INPUTS[@]}" "$ROOTFS/usr/local/bin/"
  install -d -m 0700 "$ROOTFS/var/lib/etcd"
  install -d -m 0755 "$ROOTFS/var/etcd"
}
