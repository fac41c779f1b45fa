# registry.k8s.io/coredns/coredns: CoreDNS built from e2e/cluster/coredns (its plugin list is
# in main.go) on the static base, laid out like the upstream image: /coredns, user nonroot
# (65532) with the cap_net_bind_service file capability so it can bind port 53.
BASE=static
ENTRYPOINT=(/coredns)
USER_ID=65532:65532
PORTS=(53/udp 53/tcp 9153/tcp)
INPUTS=("$OUT/bin/coredns")

prepare() {
  local dir="$ROOT/e2e/cluster/coredns" stamp="$OUT/bin/.coredns.stamp" h v
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/*.go)"
  if ! { up_to_date "$stamp" "$h" && [ -x "$OUT/bin/coredns" ]; }; then
    log "building coredns (cold: about 3 min on 2 cores)"
    (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$OUT/bin/coredns" .)
    echo "$h" > "$stamp"
  fi
  v="$("$OUT/bin/coredns" -version | sed -n 's/^CoreDNS-//p')"
  [ "v$v" = "$TAG" ] || die "coredns is $v, but the image is tagged $TAG"
}

populate() {
  install -m 0755 "$OUT/bin/coredns" "$ROOTFS/coredns"
  setcap cap_net_bind_service=+ep "$ROOTFS/coredns"
}
