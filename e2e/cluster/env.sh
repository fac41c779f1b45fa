# Settings of the local cluster, shared by up.sh, down.sh and the tests. Sourced.
# Everything the cluster writes lives under CLUSTER_DIR (data, certificates, logs) and
# CLUSTER_RUN (sockets, pids), so that down.sh can remove exactly what up.sh made.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

CLUSTER_DIR="${STATECRAFT_CLUSTER_DIR:-/var/lib/statecraft/cluster}"
CLUSTER_RUN="/run/statecraft"
KUBECONFIG_PATH="$CLUSTER_DIR/admin.kubeconfig"
NODE_NAME="statecraft-node"
# The node's address lives on an interface of its own (a port-less bridge: these kernels lack the
# dummy driver), so the cluster does not depend
# on the machine's network (which may have none) and never advertises another host's address.
NODE_IFACE="statecraft0"
NODE_IP="10.199.0.1"
POD_CIDR="10.244.0.0/24"
POD_BRIDGE="statecraft-br0"
SERVICE_CIDR="10.96.0.0/16"
KUBERNETES_SERVICE_IP="10.96.0.1"
DNS_SERVICE_IP="10.96.0.10"
CLUSTER_DOMAIN="cluster.local"
APISERVER_PORT=6443
ETCD_PORT=2379
ETCD_PEER_PORT=2380
CONTAINERD_SOCK="$CLUSTER_RUN/containerd/containerd.sock"
# The expandable storage driver's CSI socket (e2e/cluster/csi).
CSI_SOCK="$CLUSTER_RUN/csi/csi.sock"
# The netfilter queue of the NetworkPolicy enforcer (e2e/cluster/netpol).
NETPOL_QUEUE=100
# host-path provisioner directory; the controller-manager only accepts paths under /tmp.
HOSTPATH_DIR="/tmp/hostpath_pv"
# Image names (PAUSE_IMAGE, COREDNS_IMAGE, ...): one place for all of them.
source "$ROOT/deploy/images/images.env"

# cluster_is_up: the cluster is marked up and its API server still runs. /run can outlive the
# processes (a restored machine, or someone killed them), so the marker alone is not enough.
cluster_is_up() {
  [ -f "$CLUSTER_RUN/up" ] || return 1
  local pid
  pid=$(cat "$CLUSTER_RUN/kube-apiserver.pid" 2>/dev/null || true)
  # The pid may have been reused by another process since: check its name too.
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = kube-apiserver ]
}
