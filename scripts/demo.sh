#!/usr/bin/env bash
# `make demo`: what Statecraft can show so far (README.md, "Where it stands").
#
# Brings up the local cluster (a real single-node Kubernetes built from upstream parts),
# installs the MySQL operator from the manifests its `manifests` subcommand prints
# (namespaced Role, two replicas with leader election), creates a three-server MariaDB
# cluster and shows it: status, role labels, Services, Events, a switchover; then the etcd
# operator the same way, with a three-member etcd cluster grown through learners and
# scaled to five; then the Kafka operator, with a KRaft cluster of three combined nodes, a
# KafkaTopic and a configuration change applied without a restart. What each part showed is
# recorded as capability evidence (L1.install, L4.events; e2e/src/bin/demo-evidence.rs), and
# the Makefile then prints the capability report.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/env.sh"
cd "$ROOT"
export KUBECONFIG="$KUBECONFIG_PATH"
show() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
# install_operator OPERATOR CRD...: builds statecraft-OPERATOR, applies its CRDs and waits until
# CRD... are established, then installs it into namespace demo from its `manifests` output.
install_operator() {
  local bin="statecraft-$1" key image
  shift
  cargo build -q --locked -p "$bin" --bin "$bin"
  key="${bin//-/_}"
  image="$(grep "^${key^^}_IMAGE=" deploy/images/images.env | cut -d= -f2)"
  image="${image:?no image for $bin in deploy/images/images.env}"
  "$ROOT/target/debug/$bin" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl wait --for=condition=Established "${@/#/crd/}" --timeout=30s >/dev/null
  "$ROOT/target/debug/$bin" manifests --namespace demo --image "$image" | kubectl apply -n demo -f - >/dev/null
  kubectl -n demo rollout status "deployment/$bin" --timeout=180s >/dev/null
}

"$ROOT/e2e/cluster/up.sh"
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
install_operator mysql mysqlclusters.mysql.statecraft.io
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
show kubectl -n demo get pods -L mysql.statecraft.io/role,mysql.statecraft.io/reads
show kubectl -n demo get services
show kubectl -n demo get mysqlcluster demo -o jsonpath='{range .status.members[*]}{.name}{"\t"}{.role}{"\tready="}{.ready}{"\tgtid="}{.gtidExecuted}{"\n"}{end}'
log "asking for a switchover to demo-2"
kubectl -n demo annotate mysqlcluster demo mysql.statecraft.io/switchover-to=demo-2 --overwrite >/dev/null
for _ in $(seq 60); do
  [ "$(kubectl -n demo get mysqlcluster demo -o jsonpath='{.status.currentPrimary}')" = demo-2 ] && break
  sleep 1
done
kubectl -n demo wait --for=condition=Ready mysqlcluster/demo --timeout=120s >/dev/null
show kubectl -n demo get pods -L mysql.statecraft.io/role,mysql.statecraft.io/reads
show kubectl -n demo get events --field-selector involvedObject.kind=MySQLCluster --sort-by=.lastTimestamp
show kubectl -n demo get lease statecraft-mysql
# What the demo just did, judged and recorded as evidence (L1.install, L4.events) for the
# capability report, as an e2e test records it.
cargo build -q --locked -p statecraft-e2e --bin statecraft-demo-evidence
evidence="$ROOT/target/debug/statecraft-demo-evidence"
"$evidence" mysql demo demo Switchover || log "the MySQL steps did not prove their criteria: recorded as a failed run"

log "the etcd operator"
install_operator etcd etcdclusters.etcd.statecraft.io
kubectl -n demo apply -f - >/dev/null <<'YAML'
apiVersion: etcd.statecraft.io/v1alpha1
kind: EtcdCluster
metadata:
  name: kv
spec:
  version: "3.6.16"
  replicas: 3
  storage: {size: 1Gi}
  resources: {requests: {cpu: 50m, memory: 128Mi}, limits: {memory: 512Mi}}
YAML
kubectl -n demo wait --for=condition=Ready etcdcluster/kv --timeout=300s >/dev/null
show kubectl -n demo get etcdcluster kv
log "scaling kv to five members (each joins as a learner, then is promoted)"
kubectl -n demo patch etcdcluster kv --type=merge -p '{"spec":{"replicas":5}}' >/dev/null
for _ in $(seq 120); do
  [ "$(kubectl -n demo get etcdcluster kv -o jsonpath='{.status.phase}')" = Healthy ] &&
    [ "$(kubectl -n demo get etcdcluster kv -o jsonpath='{.status.members[*].name}' | wc -w)" = 5 ] && break
  sleep 1
done
show kubectl -n demo get etcdcluster kv -o jsonpath='{range .status.members[*]}{.name}{"\tleader="}{.leader}{"\tlearner="}{.learner}{"\thealthy="}{.healthy}{"\tdb="}{.dbSize}{"\n"}{end}'
show kubectl -n demo get events --field-selector involvedObject.kind=EtcdCluster --sort-by=.lastTimestamp
"$evidence" etcd demo kv AddLearner Promote || log "the etcd steps did not prove their criteria: recorded as a failed run"

log "the Kafka operator"
install_operator kafka kafkaclusters.kafka.statecraft.io kafkatopics.kafka.statecraft.io
kafka_spec() { # LOG_RETENTION_MS: the cluster, with that cluster-wide dynamic key
  cat <<YAML
apiVersion: kafka.statecraft.io/v1alpha1
kind: KafkaCluster
metadata:
  name: stream
spec:
  combined:
    replicas: 3
    storage: {size: 1Gi, fixOwnership: true}
    resources: {requests: {cpu: 50m, memory: 640Mi}, limits: {memory: 640Mi}}
  config: {log.retention.ms: "$1"}
YAML
}
kafka_spec 604800000 | kubectl -n demo apply -f - >/dev/null
kubectl -n demo wait --for=condition=Ready kafkacluster/stream --timeout=400s >/dev/null
kubectl -n demo apply -f - >/dev/null <<'YAML'
apiVersion: kafka.statecraft.io/v1alpha1
kind: KafkaTopic
metadata:
  name: orders
spec:
  clusterName: stream
  partitions: 6
  replicationFactor: 3
  config: {min.insync.replicas: "2"}
YAML
kubectl -n demo wait --for=condition=InSync kafkatopic/orders --timeout=120s >/dev/null
show kubectl -n demo get kafkacluster stream
show kubectl -n demo get kafkacluster stream -o jsonpath='{range .status.nodes[*]}{.pod}{"\tid="}{.id}{"\t"}{.role}{"\tready="}{.ready}{"\t"}{.brokerState}{"\n"}{end}'
show kubectl -n demo get kafkatopic orders
log "a cluster-wide dynamic key: applied to every broker, no pod restarts"
kafka_spec 86400000 | kubectl -n demo apply -f - >/dev/null
# (The Event of the change is folded into the series of the first Reconfigured Event, whose
# note kube's recorder keeps: ask a broker instead.)
for _ in $(seq 60); do
  kubectl -n demo exec stream-combined-0 -c kafka -- kafka-configs --bootstrap-server localhost:9092 \
    --describe --entity-type brokers --entity-default 2>/dev/null | grep -q 'log.retention.ms=86400000 ' && break
  sleep 1
done
show kubectl -n demo exec stream-combined-0 -c kafka -- kafka-configs --bootstrap-server localhost:9092 \
  --describe --entity-type brokers --entity-default
show kubectl -n demo get pods -l kafka.statecraft.io/cluster=stream
show kubectl -n demo get events --field-selector involvedObject.kind=KafkaCluster --sort-by=.lastTimestamp
"$evidence" kafka demo stream Reconfigured || log "the Kafka steps did not prove their criteria: recorded as a failed run"

cat <<MSG

The cluster stays up: KUBECONFIG=$KUBECONFIG_PATH $BIN/kubectl -n demo ...; \`make cluster-down\`
removes it. The root password is in Secret demo-passwords; the read-write Service is
demo-primary; the etcd cluster's client Service is kv-client; Kafka clients bootstrap from
stream-bootstrap:9092. Next: the capability report.
MSG
