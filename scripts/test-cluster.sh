#!/usr/bin/env bash
# The cluster part of `make test`: brings the local cluster up (unless it already is),
# runs the e2e tests that `make test` includes (the cluster checks, the MySQL, etcd and
# Kafka smoke tests, the install paths and one fault case per operator), and brings the cluster down again if this
# script brought it up.
source "$(dirname "$0")/lib.sh"
source "$ROOT/e2e/cluster/env.sh"
cd "$ROOT"

started_here=false
# A stale marker (the API server gone) counts as down: up.sh clears it.
if ! cluster_is_up; then
  started_here=true
  trap '"$ROOT/e2e/cluster/down.sh"' EXIT
  "$ROOT/e2e/cluster/up.sh"
fi
cargo test -p statecraft-e2e --locked --no-fail-fast --test cluster -- --ignored
# The MySQL operator's e2e smoke test: install, a 3-server cluster Ready, a failover under
# writes with no acknowledged write lost. `make e2e` runs every scenario.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  mysql_cluster_becomes_ready_and_fails_over_without_losing_acknowledged_writes
# The servers' own metrics: the mysqld_exporter sidecar rolled in under writes (none lost),
# then every pod's sidecar logged in and running every collector.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  mysql_exporter_sidecar_serves_every_servers_own_metrics
# Declared accounts and databases (MySQLUser, MySQLDatabase): on every server, judged by the
# real client in each pod; grants, password rotation, a switchover, deletion per policy.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  accounts::mysql_declared_accounts_and_databases_reach_every_server_and_follow_their_resources
# Growing volumes: 3 servers' volumes grown (the real CSI sidecars, the kubelet growing the
# mounted file system) under writes with no restart; a shrink refused; a StorageClass
# without allowVolumeExpansion refused with Kubernetes' reason.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  volumes::mysql_volumes_grow_while_the_servers_run_and_refusals_name_the_reason
# spec.networkPolicy: the servers run under it; a named client and scraper get in, a pod
# the policy does not name is refused (the local cluster enforces NetworkPolicies).
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  network::mysql_network_policy_lets_in_only_the_named_clients_and_scrapers
# spec.tls with requireSecureTransport: the real client checking the certificate gets TLS,
# plaintext is refused, replicas replicate over TLS, a renewed certificate is loaded by
# every server without a restart under writes.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  tls::mysql_tls_checked_by_the_real_client_replicated_and_renewed_without_a_restart
# The etcd operator's: install, a 3-member cluster grown through learners to Ready, a
# linearizable client through the client Service, the operator's metrics.
cargo test -p statecraft-e2e --locked --no-fail-fast --test etcd -- --ignored --exact \
  etcd_cluster_of_three_becomes_ready_and_serves_linearizable_clients
# Leadership on request (the leader annotation) under linearizable clients (porcupine).
cargo test -p statecraft-e2e --locked --no-fail-fast --test etcd -- --ignored --exact \
  etcd_leadership_moves_to_the_member_a_request_names_under_linearizable_clients
# spec.networkPolicy on etcd: a named client writes with etcdctl, another pod is refused.
cargo test -p statecraft-e2e --locked --no-fail-fast --test etcd -- --ignored --exact \
  etcd_network_policy_lets_in_only_the_named_clients
# The Kafka operator's: install, 3 controllers and 3 brokers Ready, a new image rolled
# through every node while VerifiableProducer writes (acks=all), every acknowledged record
# read back by VerifiableConsumer, none twice, no partition below min ISR.
cargo test -p statecraft-e2e --locked --no-fail-fast --test kafka -- --ignored --exact \
  kafka_cluster_becomes_ready_and_rolls_without_losing_acknowledged_records
# Placement (spec.podTemplate, the same shared code for every operator) on etcd's members:
# every knob on every pod; a node selector no node matches stops the roll at one member
# (quorum and writes kept, the member not replaced, its claim kept), put right it converges.
cargo test -p statecraft-e2e --locked --no-fail-fast --test etcd -- --ignored --exact \
  etcd_members_follow_the_pod_template_and_an_unplaceable_one_stops_the_roll
# The ways users install (e2e/tests/install.rs): every operator from its one-file install
# into a namespace that did not exist (an editor of that namespace may then create clusters,
# a viewer may not), and the README's quick start as written (Helm, a 3-server MySQL
# cluster, the client, a backup to S3, a restore), then helm upgrade and uninstall; and one
# etcd operator installed with Helm's watchNamespaces managing clusters in two namespaces.
cargo test -p statecraft-e2e --locked --no-fail-fast --test install -- --ignored --test-threads=1
# One fast fault case per operator (`make e2e` runs them all, FAULT_RUNS times): MySQL's
# operator cut off from the primary (iptables in the pod's netns) with four writers, four
# register clients checked for linearizability by porcupine, and replica checksums; etcd's clients checked for linearizability by porcupine while a
# follower and then the leader are deleted.
cargo test -p statecraft-e2e --locked --no-fail-fast --test mysql -- --ignored --exact \
  faults::mysql_fault_operator_cut_off_from_the_primary
cargo test -p statecraft-e2e --locked --no-fail-fast --test etcd -- --ignored --exact \
  etcd_clients_stay_linearizable_while_a_follower_then_the_leader_is_deleted
if $started_here; then
  log "cluster checks done; taking the cluster down"
fi
