#!/usr/bin/env bash
# Builds the pinned Kubernetes components (one multi-call binary plus symlinks), the
# pinned etcd, etcdctl and etcdutl, the local cluster's expandable storage (the
# statecraft-loop-csi driver with the CSI sidecars csi-provisioner and csi-resizer) and its
# NetworkPolicy enforcer (statecraft-netpol, around kube-network-policies) from their Go
# modules into $CACHE/bin. Skips a build when its Go sources and module files are
# unchanged since the last one.
source "$(dirname "$0")/lib.sh"

KUBE_VERSION="$(cd "$ROOT/e2e/cluster/kube" && go list -m -f "{{.Version}}" k8s.io/kubernetes)"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_kube() {
  local dir="$ROOT/e2e/cluster/kube" stamp="$BIN/.kube.stamp" h
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/*.go)"
  if up_to_date "$stamp" "$h" && [ -x "$BIN/kube" ]; then log "kubernetes $KUBE_VERSION: up to date"; return; fi
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  log "building kubernetes $KUBE_VERSION (cold: 15-25 min on 2 cores)"
  (cd "$dir" && go build -trimpath -o "$BIN/kube" -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=$minor \
      -X k8s.io/component-base/version.gitTreeState=clean \
      -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z" .)
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
    ln -sf kube "$BIN/$c"
  done
  echo "$h" > "$stamp"
}

# build_module DIR BINARIES PACKAGE...: builds PACKAGE... of the Go module in e2e/cluster/DIR
# into $BIN, unless its module files and programs (cmd/*) are unchanged since the last build
# and every one of BINARIES (space-separated) is there.
build_module() {
  local dir="$ROOT/e2e/cluster/$1" stamp="$BIN/.$1.stamp" binaries="$2" h b present=true
  shift 2
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/cmd/*/*.go)"
  for b in $binaries; do [ -x "$BIN/$b" ] || present=false; done
  if up_to_date "$stamp" "$h" && $present; then log "${binaries// /, }: up to date"; return; fi
  log "building ${binaries// /, }"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/" "$@")
  echo "$h" > "$stamp"
}

build_module etcd "etcd etcdctl etcdutl" ./cmd/etcd ./cmd/etcdctl go.etcd.io/etcd/etcdutl/v3
build_kube
# The storage the local cluster can grow: the driver and the two CSI sidecars, from one
# module so that they share one set of dependencies.
build_module csi "statecraft-loop-csi csi-provisioner csi-resizer" ./cmd/statecraft-loop-csi \
  github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner \
  github.com/kubernetes-csi/external-resizer/cmd/csi-resizer
# The NetworkPolicy enforcer.
build_module netpol statecraft-netpol ./cmd/statecraft-netpol
