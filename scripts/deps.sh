#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently: Debian packages, then
# the pinned Kubernetes and etcd binaries (built from their Go modules), the e2e tests'
# linearizability checker (statecraft-porcupine, also from a Go module), Prometheus's
# promtool (the alerts' unit tests, from the Prometheus Go module), helm (charts linted and
# rendered by Helm's own code, from its Go module), statecraft-olm-validate (OLM bundles
# checked by the Operator Framework's own validators, from its Go module) and the S3 server
# used by tests. Safe to run again; each step skips what is already there.
source "$(dirname "$0")/lib.sh"

# Disk first: a full disk shows up much later as strange failures (a real S3 server
# answering 500 to every part of a large upload). A cold `make test` writes about
# $NEEDED_GB GB (the debug build, the operator images, the cluster's containers, caches).
NEEDED_GB=30
free_gb=$(df -P -BG "$ROOT" | awk 'NR==2 { sub("G", "", $4); print $4 }')
if [ -n "$free_gb" ] && [ "$free_gb" -lt "$NEEDED_GB" ]; then
  log "warning: only ${free_gb} GB free on $(df -P "$ROOT" | awk 'NR==2 { print $6 }'); a cold make test writes about ${NEEDED_GB} GB (less when caches are warm)"
fi

APT_PACKAGES=(
  # builds
  build-essential pkg-config cmake protobuf-compiler libprotobuf-dev libcurl4-openssl-dev ca-certificates openssl
  # the local cluster's node: container runtime, CNI plugins, kube-proxy's tools
  containerd runc containernetworking-plugins iptables conntrack iproute2 ethtool socat kmod
  # its expandable storage (statecraft-loop-csi): XFS images on loop devices, grown online
  xfsprogs
  # the MySQL operator's integration tests start real MariaDB servers (binaries only, no
  # service): mariadbd, mariadb-install-db, the client and mariadb-dump
  mariadb-server-core mariadb-client-core mariadb-client
  # the e2e suite measures the write path of a MariaDB cluster with sysbench's oltp_write_only
  sysbench
  # the capability report's HTML page is rendered headless in a screenshot test
  chromium
  # scripts read JSON reports (test-bundles.sh)
  jq
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
command -v go >/dev/null || { echo "go not found: install Go 1.26 or newer first (promtool and helm need it)" >&2; exit 1; }

"$ROOT/scripts/build-kube.sh"
"$ROOT/scripts/build-go-tools.sh"
"$ROOT/scripts/install-s3-server.sh"
"$ROOT/scripts/install-kafka-jars.sh" >/dev/null
