#!/usr/bin/env bash
# `make cluster-up`: a real single-node Kubernetes from upstream parts, the same parts kind
# runs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy
# (iptables) and CoreDNS, with containerd + runc + the CNI bridge from Debian. No Docker, no
# registry: images are built offline and imported into containerd.
#
# Writes the admin kubeconfig to $CLUSTER_DIR/admin.kubeconfig; kubectl of the cluster's
# version is $BIN/kubectl. `make cluster-down` removes everything this script made.
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/pki.sh"
HERE="$ROOT/e2e/cluster"

if cluster_is_up; then
  log "the local cluster is already up: KUBECONFIG=$KUBECONFIG_PATH (make cluster-down removes it)"
  exit 0
fi
if [ -f "$CLUSTER_RUN/up" ]; then
  # Marked up but the API server is gone: tear down what is left (mounts, iptables, the
  # bridge) before starting again.
  log "the local cluster was marked up but its API server is gone: bringing it down first"
  "$HERE/down.sh"
fi
started=$(date +%s)

# daemon NAME CMD...: runs CMD in its own session, logging to $CLUSTER_DIR/logs/NAME.log.
daemon() {
  local name="$1"; shift
  setsid "$@" >"$CLUSTER_DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$CLUSTER_RUN/$name.pid"
}

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
  local what="$1" limit="$2"; shift 2
  local t=0
  until "$@" >/dev/null 2>&1; do
    t=$((t + 1))
    if [ "$t" -ge $((limit * 2)) ]; then
      echo "timed out after ${limit}s waiting for $what; logs in $CLUSTER_DIR/logs" >&2
      exit 1
    fi
    sleep 0.5
  done
}

kc() { kubectl --kubeconfig "$KUBECONFIG_PATH" "$@"; }

log "preflight"
"$ROOT/scripts/build-kube.sh"
"$ROOT/scripts/build-images.sh"
for b in containerd runc conntrack iptables mkfs.xfs xfs_growfs losetup; do
  command -v "$b" >/dev/null || { echo "$b missing: run scripts/deps.sh" >&2; exit 1; }
done
[ -x /usr/lib/cni/bridge ] || { echo "CNI plugins missing: run scripts/deps.sh" >&2; exit 1; }

mkdir -p "$CLUSTER_DIR"/{logs,etcd,kubelet,containerd,cni/net.d} "$CLUSTER_RUN" "$HOSTPATH_DIR"
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true

log "node address $NODE_IP on $NODE_IFACE"
ip link show "$NODE_IFACE" >/dev/null 2>&1 || ip link add "$NODE_IFACE" type bridge
ip addr replace "$NODE_IP/32" dev "$NODE_IFACE"
ip link set "$NODE_IFACE" up

log "certificates"
make_pki

log "etcd"
daemon etcd etcd --name "$NODE_NAME" --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "$NODE_NAME=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn

log "kube-apiserver"
daemon kube-apiserver kube-apiserver \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$NODE_IP" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged=true --v 1
wait_for kube-apiserver 60 kc get --raw /readyz

log "kube-controller-manager and kube-scheduler"
daemon kube-controller-manager kube-controller-manager \
  --kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --use-service-account-credentials --service-cluster-ip-range "$SERVICE_CIDR" \
  --controllers '*,-nodeipam' --enable-hostpath-provisioner --v 1
daemon kube-scheduler kube-scheduler \
  --kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --v 1

log "containerd"
sed -e "s|@ROOT@|$CLUSTER_DIR/containerd|; s|@STATE@|$CLUSTER_RUN/containerd|; s|@SOCK@|$CONTAINERD_SOCK|" \
    -e "s|@CNI_CONF@|$CLUSTER_DIR/cni/net.d|; s|@PAUSE_IMAGE@|$PAUSE_IMAGE|; s|@RUNC_ROOT@|$CLUSTER_RUN/runc|" "$HERE/config/containerd.toml" > "$CLUSTER_DIR/containerd.toml"
daemon containerd containerd --config "$CLUSTER_DIR/containerd.toml"
wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
CONTAINERD_ADDRESS="$CONTAINERD_SOCK" "$ROOT/scripts/import-images.sh"

log "CNI bridge $POD_BRIDGE for $POD_CIDR"
sed -e "s|@BRIDGE@|$POD_BRIDGE|; s|@POD_CIDR@|$POD_CIDR|; s|@STATE@|$CLUSTER_DIR/cni/ipam|" \
  "$HERE/config/cni.conflist" > "$CLUSTER_DIR/cni/net.d/10-statecraft.conflist"

log "kubelet"
: > "$CLUSTER_DIR/resolv.conf"
sed -e "s|@PKI@|$PKI|g; s|@DNS@|$DNS_SERVICE_IP|; s|@DOMAIN@|$CLUSTER_DOMAIN|; s|@SOCK@|$CONTAINERD_SOCK|" \
    -e "s|@RESOLV@|$CLUSTER_DIR/resolv.conf|; s|@POD_CIDR@|$POD_CIDR|" \
  "$HERE/config/kubelet.yaml" > "$CLUSTER_DIR/kubelet.yaml"
daemon kubelet kubelet --config "$CLUSTER_DIR/kubelet.yaml" \
  --kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" --root-dir "$CLUSTER_DIR/kubelet" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1
wait_for "node $NODE_NAME to register" 60 kc get node "$NODE_NAME"

log "expandable storage: statecraft-loop-csi with csi-provisioner and csi-resizer"
# The driver answers the kubelet's plugin watcher itself; the sidecars are the ones a
# user's cluster runs. They act for the cluster's administrator (test infrastructure).
mkdir -p "$CLUSTER_RUN/csi"
daemon statecraft-loop-csi statecraft-loop-csi --endpoint "$CSI_SOCK" \
  --registration-dir "$CLUSTER_DIR/kubelet/plugins_registry" --volumes "$CLUSTER_DIR/csi-volumes" --node "$NODE_NAME"
wait_for "the storage driver's socket" 30 test -S "$CSI_SOCK"
daemon csi-provisioner csi-provisioner --csi-address "$CSI_SOCK" --kubeconfig "$KUBECONFIG_PATH" --v 1
daemon csi-resizer csi-resizer --csi-address "$CSI_SOCK" --kubeconfig "$KUBECONFIG_PATH" --v 1

log "NetworkPolicies: statecraft-netpol (kube-network-policies) fed by iptables NFQUEUE"
# The first packet of each connection from or to a pod (not to a Service address without
# endpoints: kube-proxy rejects those further down) goes to the enforcer's queue, which
# accepts or drops it; `--queue-bypass` lets packets through while no enforcer listens.
daemon statecraft-netpol statecraft-netpol --kubeconfig "$KUBECONFIG_PATH" --node "$NODE_NAME" --queue "$NETPOL_QUEUE" --v 1
iptables -N STATECRAFT-NETPOL 2>/dev/null || iptables -F STATECRAFT-NETPOL
iptables -A STATECRAFT-NETPOL -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
iptables -A STATECRAFT-NETPOL -d "$SERVICE_CIDR" -j RETURN
iptables -A STATECRAFT-NETPOL -s "$POD_CIDR" -j NFQUEUE --queue-num "$NETPOL_QUEUE" --queue-bypass
iptables -A STATECRAFT-NETPOL -d "$POD_CIDR" -j NFQUEUE --queue-num "$NETPOL_QUEUE" --queue-bypass
iptables -C FORWARD -j STATECRAFT-NETPOL 2>/dev/null || iptables -I FORWARD 1 -j STATECRAFT-NETPOL

log "kube-proxy (iptables)"
sed -e "s|@KUBECONFIG@|$CLUSTER_DIR/kube-proxy.kubeconfig|; s|@NODE@|$NODE_NAME|; s|@POD_CIDR@|$POD_CIDR|" \
  "$HERE/config/kube-proxy.yaml" > "$CLUSTER_DIR/kube-proxy.yaml"
daemon kube-proxy kube-proxy --config "$CLUSTER_DIR/kube-proxy.yaml" --v 1

log "add-ons: default StorageClass, the expandable one, CoreDNS"
wait_for "the default service account" 60 kc -n default get serviceaccount default
sed -e "s|@DNS@|$DNS_SERVICE_IP|; s|@DOMAIN@|$CLUSTER_DOMAIN|; s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" \
  "$HERE/config/addons.yaml" | kc apply -f - >/dev/null
wait_for "node Ready" 90 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
wait_for "CoreDNS" 90 kc -n kube-system rollout status deployment/coredns --timeout=1s

touch "$CLUSTER_RUN/up"
log "cluster up in $(( $(date +%s) - started ))s: export KUBECONFIG=$KUBECONFIG_PATH; kubectl is $BIN/kubectl"
