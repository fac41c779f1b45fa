# start.sh ROLE (controller, broker or combined), in the pod of a node. The lines above it
# (see script.rs) give the operator's constants and the directories; brokers get their
# listeners' ports from INTERNAL_PORT and EXTERNAL_PORT (empty: no external listener). It
# 1. takes the node id from the pod's ordinal (brokers: BROKER_ID_BASE + ordinal);
# 2. writes the node's properties into the run directory: the pool's file from the
#    ConfigMap plus node.id and advertised.listeners (the pod's stable DNS name through the
#    headless Service, which has the StatefulSet's name: POD_NAME without its ordinal);
# 3. formats the storage when it has no meta.properties: controllers of a new cluster with
#    every initial voter (KIP-853), a controller of a cluster whose quorum was bootstrapped
#    already (its volume was lost) with --no-initial-controllers, brokers with the cluster
#    id alone;
# 4. execs Kafka.
# Messages go to stderr; any failure stops the container (set -eu) and the kubelet retries.

log() { printf 'statecraft-kafka: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ $# -eq 1 ] || die "usage: start.sh controller|broker|combined"
role=$1

ordinal=${POD_NAME##*-}
case $ordinal in
  '' | *[!0-9]*) die "pod name ${POD_NAME} does not end in an ordinal" ;;
esac
case $role in
  controller | combined) node_id=$ordinal ;;
  broker) node_id=$((BROKER_ID_BASE + ordinal)) ;;
  *) die "unknown role ${role}: controller, broker or combined" ;;
esac
host="${POD_NAME}.${POD_NAME%-*}.${POD_NAMESPACE}.svc"

case $role in
  controller) advertised="CONTROLLER://${host}:${CONTROLLER_PORT}" ;;
  broker) advertised="INTERNAL://${host}:${INTERNAL_PORT:?INTERNAL_PORT is not set}" ;;
  combined) advertised="INTERNAL://${host}:${INTERNAL_PORT:?INTERNAL_PORT is not set},CONTROLLER://${host}:${CONTROLLER_PORT}" ;;
esac

# The external address: HOST:PORT as the operator wrote it once known (a load balancer's
# address appears some time after its Service); an empty HOST is the node's own address.
if [ "$role" != controller ] && [ -n "${EXTERNAL_PORT:-}" ]; then
  file="${KAFKA_CONFIG_DIR}/external-${ordinal}"
  waited=0
  until [ -s "$file" ]; do
    if [ $((waited % 60)) -eq 0 ]; then
      log "node ${node_id}: waiting for its external address (${file}), which the operator writes once the broker's external Service has one"
    fi
    sleep "$KAFKA_POLL_SECONDS"
    waited=$((waited + KAFKA_POLL_SECONDS))
  done
  address=$(cat "$file")
  external_host=${address%:*}
  external_port=${address##*:}
  if [ -z "$external_host" ]; then
    external_host=${HOST_IP:?HOST_IP is not set: the node address of a NodePort listener}
    case $external_host in
      *:*) external_host="[${external_host}]" ;;
    esac
  fi
  advertised="${advertised},EXTERNAL://${external_host}:${external_port}"
fi

properties="${KAFKA_RUN_DIR}/server.properties"
{
  cat "${KAFKA_CONFIG_DIR}/${role}.properties"
  printf 'node.id=%s\nadvertised.listeners=%s\n' "$node_id" "$advertised"
} >"${properties}.new"
mv "${properties}.new" "$properties"

cluster_id=$(cat "${KAFKA_CONFIG_DIR}/cluster-id")
if [ -f "${KAFKA_DATA_DIR}/meta.properties" ]; then
  log "node ${node_id}: storage formatted already (${KAFKA_DATA_DIR}/meta.properties), starting"
else
  case $role in
    broker)
      log "node ${node_id}: formatting empty storage for cluster ${cluster_id}"
      "${KAFKA_BIN}/kafka-storage.sh" format --config "$properties" --cluster-id="$cluster_id"
      ;;
    *)
      if [ "$(cat "${KAFKA_CONFIG_DIR}/bootstrapped")" = true ]; then
        log "node ${node_id}: controller without a metadata log in a cluster whose quorum was bootstrapped already (its volume was lost): formatting with --no-initial-controllers and a new directory id; it is not a voter until added back"
        "${KAFKA_BIN}/kafka-storage.sh" format --config "$properties" --cluster-id="$cluster_id" --no-initial-controllers
      else
        voters=$(cat "${KAFKA_CONFIG_DIR}/initial-controllers")
        log "node ${node_id}: formatting a new cluster ${cluster_id} with the initial voters ${voters}"
        "${KAFKA_BIN}/kafka-storage.sh" format --config "$properties" --cluster-id="$cluster_id" --initial-controllers "$voters"
      fi
      ;;
  esac
fi
log "node ${node_id}: starting Kafka as ${role}, advertising ${advertised}"
exec "${KAFKA_BIN}/kafka-server-start.sh" "$properties"
