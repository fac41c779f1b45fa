#!/usr/bin/env bash
# `make demo`: what Statecraft can show so far (README.md, "Where it stands").
#
# Brings up the local cluster (a real single-node Kubernetes built from upstream parts),
# installs the MySQL operator from the manifests its `manifests` subcommand prints
# (namespaced Role, two replicas with leader election), creates a three-server MariaDB
# cluster and shows it: status, role labels, Services, Events, a switchover. The Makefile
# then prints the capability report. The etcd and Kafka operators define no resources yet.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/env.sh"
cd "$ROOT"
export KUBECONFIG="$KUBECONFIG_PATH"
show() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

"$ROOT/e2e/cluster/up.sh"
cargo build -q --locked -p statecraft-mysql --bin statecraft-mysql
op="$ROOT/target/debug/statecraft-mysql"
image="$(grep '^STATECRAFT_MYSQL_IMAGE=' deploy/images/images.env | cut -d= -f2)"

kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
"$op" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl wait --for=condition=Established crd/mysqlclusters.mysql.statecraft.io --timeout=30s >/dev/null
"$op" manifests --namespace demo --image "$image" | kubectl apply -n demo -f - >/dev/null
kubectl -n demo rollout status deployment/statecraft-mysql --timeout=180s >/dev/null
# fixOwnership: this cluster's host-path provisioner ignores fsGroup (docs/mysql.md).
kubectl -n demo apply -f - >/dev/null <<'YAML'
apiVersion: mysql.statecraft.io/v1alpha1
kind: MySQLCluster
metadata:
  name: demo
spec:
  flavor: mariadb
  version: "10.11"
  replicas: 3
  storage: {size: 1Gi, fixOwnership: true}
  resources: {requests: {cpu: 50m, memory: 256Mi}, limits: {memory: 512Mi}}
YAML
kubectl -n demo wait --for=condition=Ready mysqlcluster/demo --timeout=400s >/dev/null

show kubectl -n demo get mysqlcluster demo
show kubectl -n demo get pods -L mysql.statecraft.io/role
show kubectl -n demo get services
show kubectl -n demo get mysqlcluster demo -o jsonpath='{range .status.members[*]}{.name}{"\t"}{.role}{"\tready="}{.ready}{"\tgtid="}{.gtidExecuted}{"\n"}{end}'
log "asking for a switchover to demo-2"
kubectl -n demo annotate mysqlcluster demo mysql.statecraft.io/switchover-to=demo-2 --overwrite >/dev/null
for _ in $(seq 60); do
  [ "$(kubectl -n demo get mysqlcluster demo -o jsonpath='{.status.currentPrimary}')" = demo-2 ] && break
  sleep 1
done
kubectl -n demo wait --for=condition=Ready mysqlcluster/demo --timeout=120s >/dev/null
show kubectl -n demo get pods -L mysql.statecraft.io/role
show kubectl -n demo get events --field-selector involvedObject.kind=MySQLCluster --sort-by=.lastTimestamp
show kubectl -n demo get lease statecraft-mysql

cat <<MSG

The cluster stays up: KUBECONFIG=$KUBECONFIG_PATH $BIN/kubectl -n demo ...; \`make cluster-down\`
removes it. The root password is in Secret demo-passwords; the read-write Service is
demo-primary. Next: the capability report. Not there yet: the etcd and Kafka operators.
MSG
