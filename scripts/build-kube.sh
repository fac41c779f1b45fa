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

build_etcd() {
  local dir="$ROOT/e2e/cluster/etcd" stamp="$BIN/.etcd.stamp" h
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/cmd/*/*.go)"
  if up_to_date "$stamp" "$h" && [ -x "$BIN/etcd" ]; then log "etcd: up to date"; return; fi
  log "building etcd, etcdctl, etcdutl"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/" ./cmd/etcd ./cmd/etcdctl go.etcd.io/etcd/etcdutl/v3)
  echo "$h" > "$stamp"
}

# The storage the local cluster can grow (e2e/cluster/csi): the driver and the two
# sidecars, from one module so that they share one set of dependencies.
build_csi() {
  local dir="$ROOT/e2e/cluster/csi" stamp="$BIN/.csi.stamp" h
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/cmd/*/*.go)"
  if up_to_date "$stamp" "$h" && [ -x "$BIN/statecraft-loop-csi" ] && [ -x "$BIN/csi-provisioner" ] && [ -x "$BIN/csi-resizer" ]; then
    log "statecraft-loop-csi, csi-provisioner, csi-resizer: up to date"
    return
  fi
  log "building statecraft-loop-csi, csi-provisioner, csi-resizer"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/" ./cmd/statecraft-loop-csi \
      github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner \
      github.com/kubernetes-csi/external-resizer/cmd/csi-resizer)
  echo "$h" > "$stamp"
}

# The NetworkPolicy enforcer (e2e/cluster/netpol).
build_netpol() {
  local dir="$ROOT/e2e/cluster/netpol" stamp="$BIN/.netpol.stamp" h
  h="$(inputs_hash "$dir"/go.mod "$dir"/go.sum "$dir"/cmd/*/*.go)"
  if up_to_date "$stamp" "$h" && [ -x "$BIN/statecraft-netpol" ]; then log "statecraft-netpol: up to date"; return; fi
  log "building statecraft-netpol"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/" ./cmd/statecraft-netpol)
  echo "$h" > "$stamp"
}

build_etcd
build_kube
build_csi
build_netpol
