#!/usr/bin/env bash
# Measures the local cluster and writes results/bench/cluster.json: the time of a warm
# `cluster-up` (everything built and cached; the cluster down before), and the memory the
# whole control plane and node use at idle (RSS of etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, containerd with its shims,
# and the CoreDNS pod), 30 s after the cluster reported up. Leaves the cluster down.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/env.sh"
"$ROOT/e2e/cluster/down.sh" >/dev/null
start=$(date +%s.%N)
"$ROOT/e2e/cluster/up.sh"
up_seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
sleep 30

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
declare -A parts
total=0
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy containerd; do
  kib=$(rss_kib "$(cat "$CLUSTER_RUN/$name.pid")")
  parts[$name]=$kib
  total=$((total + kib))
done
shims=0
for pid in $(pgrep -f "containerd-shim.*-address $CONTAINERD_SOCK"); do
  shims=$((shims + $(rss_kib "$pid")))
  for child in $(pgrep -P "$pid"); do shims=$((shims + $(rss_kib "$child"))); done
done
total=$((total + shims))

mkdir -p "$ROOT/results/bench"
{
  echo "{"
  echo "  \"warm_cluster_up_seconds\": $up_seconds,"
  echo "  \"idle_rss_kib_total\": $total,"
  echo "  \"idle_rss_kib_pods_and_shims\": $shims,"
  for name in "${!parts[@]}"; do echo "  \"idle_rss_kib_$name\": ${parts[$name]},"; done
  echo "  \"method\": \"scripts/measure-cluster.sh: VmRSS from /proc, 30 s after up.sh returned; pods = containerd shims and their children (pause, CoreDNS)\""
  echo "}"
} > "$ROOT/results/bench/cluster.json"
cat "$ROOT/results/bench/cluster.json"
"$ROOT/e2e/cluster/down.sh" >/dev/null
