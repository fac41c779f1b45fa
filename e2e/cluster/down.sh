#!/usr/bin/env bash
# `make cluster-down`: stops the local cluster and removes everything up.sh made:
# processes, containers, mounts, network namespaces, interfaces, iptables rules, cgroups
# and data. Safe to run when the cluster is half up or already down.
source "$(dirname "$0")/env.sh"

kc() { kubectl --kubeconfig "$KUBECONFIG_PATH" --request-timeout=5s "$@"; }
ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }

# stop NAME: TERM, then KILL after 10 s, the daemon started as NAME.
stop() {
  local pidfile="$CLUSTER_RUN/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# Pods first, through the kubelet, so that it tears each sandbox's network down (CNI DEL).
if [ -f "$CLUSTER_RUN/kubelet.pid" ] && kc get --raw /readyz >/dev/null 2>&1; then
  log "deleting pods"
  kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
    sleep 0.5
  done
fi

log "stopping the node"
stop kubelet
stop kube-proxy
# Whatever the kubelet did not get to: kill the containers, then containerd and its shims.
if [ -S "$CONTAINERD_SOCK" ]; then
  for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
fi
stop containerd
pkill -KILL -f "containerd-shim.*-address $CONTAINERD_SOCK" 2>/dev/null || true
# The storage driver after the kubelet: the kubelet unmounts pods' volumes through it.
stop csi-resizer
stop csi-provisioner
stop statecraft-loop-csi
stop statecraft-netpol

log "stopping the control plane"
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

log "removing mounts, network and rules"
# Mounts below our directories, deepest first.
{ awk '{print $2}' /proc/mounts | grep -E "^($CLUSTER_DIR|$CLUSTER_RUN|/run/netns/cni-|/var/run/netns/cni-)" || true; } | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null || true; done
rm -f /run/netns/cni-* 2>/dev/null || true
# The expandable storage's loop devices, once nothing mounts them.
for img in "$CLUSTER_DIR"/csi-volumes/*.img; do
  [ -f "$img" ] || continue
  for dev in $(losetup -j "$img" -O NAME -n 2>/dev/null); do losetup -d "$dev" 2>/dev/null || true; done
done

# iptables: kube-proxy's own clean-up, then every rule and chain of the kubelet, kube-proxy,
# CNI plugins and the NetworkPolicy enforcer (all named KUBE-*, CNI-* or STATECRAFT-*),
# table by table, leaving the rest untouched.
kube-proxy --cleanup >/dev/null 2>&1 || true
for tool in iptables ip6tables; do
  for table in filter nat mangle; do
    if "$tool-save" -t "$table" 2>/dev/null | grep -qE 'KUBE-|CNI-|STATECRAFT-'; then
      "$tool-save" -t "$table" | grep -vE 'KUBE-|CNI-|STATECRAFT-' | "$tool-restore" -T "$table" 2>/dev/null || true
    fi
  done
done

ip link del "$POD_BRIDGE" 2>/dev/null || true
ip link del "$NODE_IFACE" 2>/dev/null || true

# The kubelet's cgroups (cgroupfs driver), deepest first.
for ctl in /sys/fs/cgroup/*/; do
  [ -d "$ctl/kubepods" ] && find "$ctl/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
done

rm -rf "$CLUSTER_DIR" "$CLUSTER_RUN" "$HOSTPATH_DIR"
rmdir --ignore-fail-on-non-empty "$(dirname "$CLUSTER_DIR")" 2>/dev/null || true
log "cluster down"
