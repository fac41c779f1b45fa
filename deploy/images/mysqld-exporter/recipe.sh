# docker.io/prom/mysqld-exporter: the Prometheus project's mysqld_exporter, which
# scripts/build-go-tools.sh builds from this directory's go.mod (a static Go binary), on the
# static base, laid out like the upstream image: /bin/mysqld_exporter, user nobody, port 9104.
BASE=static
ENTRYPOINT=(/bin/mysqld_exporter)
USER_ID=65534:65534
PORTS=(9104/tcp)
INPUTS=("$BIN/mysqld_exporter")

prepare() {
  if [ ! -x "$BIN/mysqld_exporter" ]; then
    log "mysqld_exporter missing from $BIN: running scripts/build-go-tools.sh"
    "$ROOT/scripts/build-go-tools.sh"
  fi
  local v
  v="$("$BIN/mysqld_exporter" --version 2>&1 | sed -n 's/^mysqld_exporter, version \([^ ]*\).*/\1/p')"
  [ "v$v" = "$TAG" ] || die "$BIN/mysqld_exporter is $v, but the image is tagged $TAG"
  file_is_static "$BIN/mysqld_exporter" || die "$BIN/mysqld_exporter is not statically linked"
}

populate() {
  install -d -m 0755 "$ROOTFS/bin"
  install -m 0755 "$BIN/mysqld_exporter" "$ROOTFS/bin/mysqld_exporter"
}
