//! Property tests of [`decide`] over generated observations.
//!
//! The failover properties draw clusters from a model of what semi-sync guarantees: the
//! primary committed transactions `1..=N`; every transaction it acknowledged to a client
//! (`1..=A`) was at that moment in the relay log of at least `ack_count` replicas, and each
//! replica's received set is a prefix of the history. Then the faults: the primary stops
//! answering (for `FAILOVER_AFTER_PASSES` or more) or its pod goes, some replicas stop
//! answering, some restarted (their relay log discarded, so they may have lost what they
//! acknowledged) and are listed in [`Observed::restarted`]. Receivers are mostly stopped
//! already (the `Fence` of the pass before), so that decisions reach `Promote`.
//!
//! The other properties take any observation at all (random sets of both flavors, pod
//! states, labels, ordinals) and check what must hold whatever the servers say.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use super::decide::{Decision, FAILOVER_AFTER_PASSES, Operation, decide};
use super::fixtures::addr;
use super::gtid::GtidSet;
use super::gtid_props::any_gtid_set;
use super::heal::Healing;
use super::observed::{Member, Observed, PodState, Replication, Server, ServerState};
use crate::api::Flavor;
use crate::reason::MySql;

const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const U2: &str = "4f22ab58-82db-22f2-af44-d91bb0530673";

/// The primary's history: transactions `1..=len`, the first `switch` of them written by
/// one server (MariaDB server id 100, MySQL source U1) and the rest by another (a failover
/// before this one), so that the sets are not all of one source.
#[derive(Clone, Copy, Debug)]
struct History {
    flavor: Flavor,
    len: u64,
    switch: u64,
}

impl History {
    /// The first `j` transactions, as a server of the flavor reports them.
    fn prefix(&self, j: u64) -> GtidSet {
        let j = j.min(self.len);
        let text = match self.flavor {
            Flavor::Mariadb if j == 0 => String::new(),
            Flavor::Mariadb => format!("0-{}-{j}", if j <= self.switch { 100 } else { 101 }),
            Flavor::Mysql => {
                let mut parts = Vec::new();
                if j.min(self.switch) > 0 {
                    parts.push(format!("{U1}:1-{}", j.min(self.switch)));
                }
                if j > self.switch {
                    parts.push(format!("{U2}:1-{}", j - self.switch));
                }
                parts.join(",")
            }
        };
        GtidSet::parse(self.flavor, &text).unwrap_or_else(|e| panic!("the model's sets parse: {e}"))
    }
}

/// How the primary failed.
#[derive(Clone, Copy, Debug)]
enum PrimaryDown {
    /// Its pod runs but the server did not answer this many passes in a row.
    Unreachable(u32),
    /// Its pod is gone.
    PodMissing,
    /// Its pod is being deleted.
    PodTerminating,
    /// Not even listed (no pod, not wanted any more by the gatherer).
    Absent,
}

/// A replica's receiver.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Receiver {
    /// Stopped: fenced by the pass before.
    Stopped,
    Running,
    Connecting,
    /// No channel configured at all.
    NoChannel,
}

/// One replica of the model, in raw draws that [`Scenario::observe`] turns into a
/// consistent state.
#[derive(Clone, Debug)]
struct ReplicaDraw {
    /// The most it ever received (what it could have acknowledged), mod `N + 1`.
    peak: u64,
    /// Executed, as a share of what it holds now.
    executed: u64,
    /// The relay log was emptied since (retrieved behind executed): what it holds is what
    /// it executed.
    retrieved_behind: bool,
    reachable: bool,
    receiver: Receiver,
    /// It restarted and has not caught up: what it holds now (mod `N + 1`) and, when the
    /// primary answered since, the draw of what it must receive to be complete again.
    restart: Option<(u64, Option<u64>)>,
    /// Terminating pod (still answering).
    terminating: bool,
}

fn replica_draw() -> impl Strategy<Value = ReplicaDraw> {
    let receiver = prop_oneof![
        6 => Just(Receiver::Stopped),
        1 => Just(Receiver::Running),
        1 => Just(Receiver::Connecting),
        1 => Just(Receiver::NoChannel),
    ];
    let restart = prop_oneof![3 => Just(None), 1 => (any::<u64>(), any::<Option<u64>>()).prop_map(Some)];
    (
        any::<u64>(),
        any::<u64>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.8),
        receiver,
        restart,
        prop::bool::weighted(0.1),
    )
        .prop_map(|(peak, executed, retrieved_behind, reachable, receiver, restart, terminating)| ReplicaDraw {
            peak,
            executed,
            retrieved_behind,
            reachable,
            receiver,
            restart,
            terminating,
        })
}

/// A generated failover situation.
#[derive(Clone, Debug)]
struct Scenario {
    history: History,
    /// Members (1, 3 or 5), all wanted unless `wanted` says fewer (a scale-down under way).
    size: u32,
    /// `spec.replicas`.
    wanted: u32,
    primary: u32,
    /// Acknowledgements each commit waited for.
    ack_count: u32,
    /// What the observation says the primary waits for (`Observed::ack_count`).
    reported_ack_count: u32,
    /// Acknowledged transactions, as a draw mod the most the model allows.
    acked: u64,
    primary_down: PrimaryDown,
    /// Every receiver stopped (the pass after a `Fence`).
    fenced: bool,
    replicas: Vec<ReplicaDraw>,
}

fn history() -> impl Strategy<Value = History> {
    (prop_oneof![Just(Flavor::Mariadb), Just(Flavor::Mysql)], 0..12u64, any::<u64>())
        .prop_map(|(flavor, len, switch)| History { flavor, len, switch: switch % (len + 1) })
}

fn primary_down() -> impl Strategy<Value = PrimaryDown> {
    prop_oneof![
        3 => (FAILOVER_AFTER_PASSES..FAILOVER_AFTER_PASSES + 5).prop_map(PrimaryDown::Unreachable),
        1 => Just(PrimaryDown::PodMissing),
        1 => Just(PrimaryDown::PodTerminating),
        1 => Just(PrimaryDown::Absent),
    ]
}

/// Clusters of 1, 3 or 5 members, all wanted.
fn scenario() -> impl Strategy<Value = Scenario> {
    (prop_oneof![Just(1u32), Just(3), Just(5)], any::<u32>())
        .prop_flat_map(|(size, primary)| scenario_of(size, size, primary % size))
}

/// A scale-down under way: 3 or 5 members, fewer wanted; the members beyond the wanted
/// count still run and replicate (their pods are being deleted) until they are gone. The
/// primary still waits for the acknowledgements of the old size; the observation reports
/// the count of the new one, as the task computes it.
fn scale_down_scenario() -> impl Strategy<Value = Scenario> {
    // The task's rule (`DataPlane::ack_count`): n/2 for MySQL, 1 for MariaDB.
    let acks = |flavor: Flavor, n: u32| match (n, flavor) {
        (0 | 1, _) => 0,
        (n, Flavor::Mysql) => n / 2,
        (_, Flavor::Mariadb) => 1,
    };
    prop_oneof![Just((3u32, 1u32)), Just((3, 2)), Just((5, 3)), Just((5, 4))]
        .prop_flat_map(|(size, wanted)| (Just((size, wanted)), 0..wanted))
        .prop_flat_map(|((size, wanted), primary)| scenario_of(size, wanted, primary))
        .prop_map(move |s| Scenario {
            ack_count: acks(s.history.flavor, s.size),
            reported_ack_count: acks(s.history.flavor, s.wanted),
            ..s
        })
}

fn scenario_of(size: u32, wanted: u32, primary: u32) -> impl Strategy<Value = Scenario> {
    let replicas = prop::collection::vec(replica_draw(), (size - 1) as usize);
    (
        history(),
        any::<u32>(),
        prop::bool::weighted(0.5),
        any::<u64>(),
        primary_down(),
        prop::bool::weighted(0.7),
        replicas,
    )
        .prop_map(move |(history, ack, all_acked, acked, primary_down, fenced, replicas)| Scenario {
            history,
            size,
            wanted,
            primary,
            ack_count: 1 + ack % (size - 1).max(1),
            reported_ack_count: 1 + ack % (size - 1).max(1),
            // Half the time as many as the model allows: the edge where one write is on
            // exactly `ack_count` replicas.
            acked: if all_acked { u64::MAX } else { acked },
            primary_down,
            fenced,
            replicas,
        })
}

/// One replica as the model derived it.
struct ReplicaState {
    ordinal: u32,
    peak: u64,
    executed: u64,
    retrieved: u64,
    /// `Some(needed)` when listed as restarted.
    restarted: Option<Option<u64>>,
}

impl Scenario {
    fn replica_ordinals(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.size).filter(|o| *o != self.primary)
    }

    fn states(&self) -> Vec<ReplicaState> {
        let n = self.history.len;
        self.replica_ordinals()
            .zip(&self.replicas)
            .map(|(ordinal, d)| {
                let peak = d.peak % (n + 1);
                let (received, restarted) = match d.restart {
                    None => (peak, None),
                    Some((now, needed)) => {
                        let now = now % (n + 1);
                        match needed {
                            None => (now, Some(None)),
                            // What the primary had when it was first seen after the restart:
                            // at least what the replica had acknowledged, and more than it
                            // holds now (else it would have caught up and left the list).
                            Some(draw) => {
                                let lo = peak.max(now + 1);
                                if lo > n { (now, None) } else { (now, Some(Some(lo + draw % (n - lo + 1)))) }
                            }
                        }
                    }
                };
                let (executed, retrieved) = if d.retrieved_behind || d.receiver == Receiver::NoChannel {
                    (received, d.executed % (received + 1))
                } else {
                    (d.executed % (received + 1), received)
                };
                ReplicaState { ordinal, peak, executed, retrieved, restarted }
            })
            .collect()
    }

    /// Transactions acknowledged to clients: at most the `ack_count`-th largest peak among
    /// the replicas (each acknowledged one reached that many relay logs).
    fn acknowledged(&self) -> u64 {
        let mut peaks: Vec<u64> = self.states().iter().map(|s| s.peak).collect();
        peaks.sort_unstable_by(|a, b| b.cmp(a));
        let most = peaks.get(self.ack_count as usize - 1).copied().unwrap_or(0);
        self.acked.min(most)
    }

    fn observe(&self) -> Observed {
        let h = self.history;
        let mut members = Vec::new();
        let mut restarted = BTreeMap::new();
        let pod = match self.primary_down {
            PrimaryDown::Unreachable(_) => Some(PodState::Running { ready: false }),
            PrimaryDown::PodMissing => Some(PodState::Missing),
            PrimaryDown::PodTerminating => Some(PodState::Terminating),
            PrimaryDown::Absent => None,
        };
        if let Some(pod) = pod {
            members.push(Member {
                ordinal: self.primary,
                pod,
                role_label: Some("primary".into()),
                reads_label: false,
                server: ServerState::Unreachable("connection refused".into()),
                address: addr(self.primary),
                unreachable_passes: match self.primary_down {
                    PrimaryDown::Unreachable(p) => p,
                    _ => 0,
                },
            });
        }
        for (s, d) in self.states().iter().zip(&self.replicas) {
            if let Some(needed) = s.restarted {
                restarted.insert(s.ordinal, needed.map(|n| h.prefix(n)));
            }
            let receiver =
                if self.fenced && d.receiver != Receiver::NoChannel { Receiver::Stopped } else { d.receiver };
            let replication = (receiver != Receiver::NoChannel).then(|| Replication {
                source_host: addr(self.primary).0,
                source_port: addr(self.primary).1,
                io_running: receiver == Receiver::Running,
                io_connecting: receiver == Receiver::Connecting,
                sql_running: true,
                retrieved: h.prefix(s.retrieved),
                lag_seconds: Some(0),
                last_error: None,
                source_refused: false,
            });
            let server = Server { read_only: true, executed: h.prefix(s.executed), replication, ..Server::default() };
            members.push(Member {
                ordinal: s.ordinal,
                pod: if d.terminating { PodState::Terminating } else { PodState::Running { ready: true } },
                role_label: Some("replica".into()),
                reads_label: true,
                server: if d.reachable {
                    ServerState::Up(server)
                } else {
                    ServerState::Unreachable("connection refused".into())
                },
                address: addr(s.ordinal),
                unreachable_passes: u32::from(!d.reachable) * 3,
            });
        }
        members.sort_by_key(|m| m.ordinal);
        Observed {
            replicas: self.wanted,
            paused: false,
            semi_sync: true,
            ack_count: self.reported_ack_count,
            recorded_primary: Some(self.primary),
            switchover_to: None,
            members,
            deposed: None,
            routed: BTreeSet::new(),
            heal: Healing::default(),
            recently_configured: BTreeSet::new(),
            restarted,
        }
    }
}

/// (a) A promoted replica holds every acknowledged transaction: this is the no-loss
/// promise of semi-sync failover. Also: it replaces the recorded primary and says what it
/// must apply before writes (its received set).
fn promotes_only_a_replica_with_every_acknowledged_write(s: &Scenario) -> Result<(), TestCaseError> {
    let o = s.observe();
    let d = decide(&o);
    if let Operation::Promote { ordinal, from, received } = &d.operation {
        prop_assert_eq!(*from, s.primary);
        let server = o.members.iter().find(|m| m.ordinal == *ordinal).and_then(|m| m.server.up());
        let Some(server) = server else {
            return Err(TestCaseError::fail(format!("promoted {ordinal} does not answer")));
        };
        let acked = s.history.prefix(s.acknowledged());
        prop_assert!(
            server.received().contains(&acked),
            "promoted {} holds [{}] but [{}] were acknowledged ({:?})",
            ordinal,
            server.received(),
            acked,
            o
        );
        prop_assert_eq!(received, &server.received().to_string());
    }
    no_two_writable(&o, &d)
}

/// The servers writable after `d`'s operation.
fn writable_after(o: &Observed, d: &Decision) -> BTreeSet<u32> {
    let mut w: BTreeSet<u32> =
        o.members.iter().filter(|m| m.server.up().is_some_and(|s| !s.read_only)).map(|m| m.ordinal).collect();
    match d.operation {
        Operation::Demote { ordinal } => {
            w.remove(&ordinal);
        }
        Operation::MakeWritable { ordinal } | Operation::Promote { ordinal, .. } => {
            w.insert(ordinal);
        }
        Operation::Switchover { from, to, .. } => {
            w.remove(&from);
            w.insert(to);
        }
        _ => {}
    }
    w
}

/// (b) Never two writable servers: an operation that makes a server writable leaves it the
/// only one, and a writable server that is not the recorded primary is demoted before
/// anything else (split-brain guard), unless the user paused the cluster.
fn no_two_writable(o: &Observed, d: &Decision) -> Result<(), TestCaseError> {
    let makes_writable = matches!(
        d.operation,
        Operation::MakeWritable { .. } | Operation::Promote { .. } | Operation::Switchover { .. }
    );
    if makes_writable {
        let after = writable_after(o, d);
        prop_assert!(after.len() <= 1, "{:?} leaves {:?} writable in {:?}", d.operation, after, o);
    }
    let Some(primary) = o.recorded_primary else { return Ok(()) };
    let rogues: BTreeSet<u32> = o
        .members
        .iter()
        .filter(|m| m.ordinal != primary && m.server.up().is_some_and(|s| !s.read_only))
        .map(|m| m.ordinal)
        .collect();
    if !rogues.is_empty() && !o.paused && o.replicas > 0 {
        // A rogue that clients may still reach and that no replica acknowledges may wait
        // (relabelled first) for the Service to leave it; nothing else happens meanwhile.
        let held = matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::FormerPrimaryStillRouted)
            || matches!(d.operation, Operation::Relabel { .. });
        let may_hold = rogues.iter().any(|r| o.routed.contains(r) && !acknowledged(o, *r));
        prop_assert!(
            matches!(d.operation, Operation::Demote { ordinal } if rogues.contains(&ordinal)) || (held && may_hold),
            "writable non-primaries {:?} kept writable: {:?}",
            rogues,
            d.operation
        );
    }
    Ok(())
}

/// Whether a replica's receiver runs (or connects) from member `ordinal`.
fn acknowledged(o: &Observed, ordinal: u32) -> bool {
    let Some(source) = o.members.iter().find(|m| m.ordinal == ordinal) else { return false };
    o.members.iter().any(|m| {
        m.server.up().and_then(|s| s.replication.as_ref()).is_some_and(|r| {
            (r.io_running || r.io_connecting)
                && (r.source_host.as_str(), r.source_port) == (source.address.0.as_str(), source.address.1)
        })
    })
}

/// (e) Reads stay linearizable across a failover: a read-only primary is not made writable
/// while the read-write Service may still lead new connections to another member (which
/// would serve older data beside the new primary's writes), and a rogue that nobody
/// acknowledges is not demoted while routed (demoting releases its unacknowledged commits
/// to readers).
fn no_writes_or_releases_while_routed_elsewhere(o: &Observed, d: &Decision) -> Result<(), TestCaseError> {
    match d.operation {
        Operation::MakeWritable { ordinal } => {
            let read_only =
                o.members.iter().any(|m| m.ordinal == ordinal && m.server.up().is_some_and(|s| s.read_only));
            let elsewhere: Vec<&u32> = o.routed.iter().filter(|k| **k != ordinal).collect();
            prop_assert!(
                !read_only || elsewhere.is_empty(),
                "{ordinal} made writable while {elsewhere:?} routed: {o:?}"
            );
        }
        Operation::Demote { ordinal } => {
            prop_assert!(
                !o.routed.contains(&ordinal) || acknowledged(o, ordinal),
                "routed, unacknowledged {ordinal} demoted: {o:?}"
            );
        }
        _ => {}
    }
    Ok(())
}

/// Every ordinal an operation names is a member (an operation on a server nobody observed
/// would act on a guess).
fn names_only_members(o: &Observed, d: &Decision) -> Result<(), TestCaseError> {
    let known = |k: &u32| o.members.iter().any(|m| m.ordinal == *k);
    let named: Vec<u32> = match &d.operation {
        Operation::Nothing | Operation::Wait { .. } => vec![],
        Operation::Bootstrap { primary } => vec![*primary],
        Operation::MakeWritable { ordinal } | Operation::Demote { ordinal } | Operation::Reseed { ordinal, .. } => {
            vec![*ordinal]
        }
        Operation::ConfigureReplica { ordinal, source } => {
            prop_assert_eq!(Some(*source), o.recorded_primary);
            vec![*ordinal, *source]
        }
        Operation::Fence { ordinals } => ordinals.clone(),
        Operation::Promote { ordinal, from, .. } => {
            prop_assert_eq!(Some(*from), o.recorded_primary);
            prop_assert_ne!(ordinal, from);
            vec![*ordinal]
        }
        Operation::Switchover { from, to, .. } => vec![*from, *to],
        Operation::Relabel { changes, reads } => {
            changes.iter().map(|(k, _)| *k).chain(reads.iter().map(|(k, _)| *k)).collect()
        }
    };
    prop_assert!(named.iter().all(known), "{:?} names a non-member in {:?}", d.operation, o);
    prop_assert_eq!(d.verdicts.len(), o.members.len());
    Ok(())
}

/// (d) Liveness of the same model: with every replica answering, fenced and not restarted,
/// a failover goes ahead (safety must not be bought with a cluster that never recovers).
fn fails_over_when_nothing_is_in_doubt(s: &Scenario) -> Result<(), TestCaseError> {
    let o = s.observe();
    let everyone = s.size > 1
        && o.restarted.is_empty()
        && o.members.iter().filter(|m| m.ordinal != s.primary).all(|m| {
            m.server.up().is_some_and(|srv| srv.replication.as_ref().is_none_or(|r| !r.io_running && !r.io_connecting))
        });
    if everyone {
        let d = decide(&o);
        prop_assert!(matches!(d.operation, Operation::Promote { .. }), "{:?} for {:?}", d.operation, o);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a), (b) over clusters of 1, 3 and 5 members in which every member is wanted.
    #[test]
    fn failover_never_loses_an_acknowledged_write(s in scenario()) {
        promotes_only_a_replica_with_every_acknowledged_write(&s)?;
    }

    /// (d) The model's failovers happen when no replica is in doubt.
    #[test]
    fn failover_happens_when_nothing_is_in_doubt(s in scenario()) {
        fails_over_when_nothing_is_in_doubt(&s)?;
    }

    /// (a) during a scale-down: members beyond `spec.replicas` still run and replicate
    /// until their pods are gone, so they may hold acknowledgements too.
    /// (Found by this property: the failover once counted and fenced only members below
    /// `spec.replicas`; `scale_down_failover_minimal_case` is the smallest such case.)
    #[test]
    fn failover_during_a_scale_down_never_loses_an_acknowledged_write(s in scale_down_scenario()) {
        promotes_only_a_replica_with_every_acknowledged_write(&s)?;
    }

    /// (b), (c) and the naming rule over any observation at all: decide never panics.
    #[test]
    fn any_observation_is_decided_safely(o in any_observed()) {
        let d = decide(&o);
        no_two_writable(&o, &d)?;
        names_only_members(&o, &d)?;
        no_writes_or_releases_while_routed_elsewhere(&o, &d)?;
    }
}

/// The smallest observation `failover_during_a_scale_down_never_loses_an_acknowledged_write`
/// shrinks to, by hand. MariaDB (one acknowledgement), three members scaled down to two:
/// the primary 0 stops answering; member 2, whose pod is being deleted but whose server
/// still answers, is the only one that received (and so acknowledged) transaction 10;
/// member 1 has 9. Every receiver is stopped. `decide` used to promote member 1 with
/// `0-100-9`, losing acknowledged transaction 10, and with member 2's receiver still
/// running it did not fence it either.
#[test]
fn scale_down_failover_minimal_case() {
    use super::fixtures::{cluster, primary, replica, server};
    let mut o = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-9"), replica(2, 0, "0-100-10")]);
    o.replicas = 2;
    o.members[0].server = ServerState::Unreachable("connection refused".into());
    o.members[0].unreachable_passes = FAILOVER_AFTER_PASSES;
    o.members[2].pod = PodState::Terminating;
    for i in [1, 2] {
        if let Some(r) = &mut server(&mut o.members[i]).replication {
            r.io_running = false;
        }
    }
    let op = decide(&o).operation;
    assert!(!matches!(op, Operation::Promote { ordinal: 1, .. }), "acknowledged transaction 10 lost: {op:?}");
    if let Some(r) = &mut server(&mut o.members[2]).replication {
        r.io_running = true;
    }
    let op = decide(&o).operation;
    assert!(matches!(&op, Operation::Fence { ordinals } if ordinals.contains(&2)), "member 2 not fenced: {op:?}");
}

/// The model is not vacuous: its draws reach each failover outcome that the properties
/// above judge (a property whose premise is never met cannot fail).
#[test]
fn the_model_reaches_every_failover_outcome() {
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
    for _ in 0..512 {
        let s = scenario().new_tree(&mut runner).map(|t| t.current()).unwrap_or_else(|e| panic!("{e}"));
        let kind = match decide(&s.observe()).operation {
            Operation::Promote { .. } => "Promote",
            Operation::Fence { .. } => "Fence",
            Operation::Wait { reason, .. } => reason.as_str(),
            _ => "other",
        };
        *seen.entry(kind).or_default() += 1;
    }
    let waits = [MySql::ReplicaRestartedBeforeFailover, MySql::NotEnoughReplicasForSafeFailover, MySql::PrimaryDown];
    for kind in ["Promote", "Fence"].into_iter().chain(waits.map(Into::into)) {
        assert!(seen.get(kind).is_some_and(|n| *n >= 5), "{kind} reached too rarely: {seen:?}");
    }
}

// ---- garbage observations ----

fn ordinal() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0..7u32, 1 => Just(u32::MAX)]
}

fn pod_state() -> impl Strategy<Value = PodState> {
    prop_oneof![
        Just(PodState::Missing),
        Just(PodState::Pending),
        any::<bool>().prop_map(|ready| PodState::Running { ready }),
        Just(PodState::Terminating),
    ]
}

fn replication() -> impl Strategy<Value = Replication> {
    (
        (ordinal(), prop_oneof![Just(3306u16), any::<u16>()]),
        any::<(bool, bool, bool, bool)>(),
        any_gtid_set(),
        any::<Option<i64>>(),
        prop::option::of(Just("Got fatal error".to_string())),
    )
        .prop_map(
            |(
                (host, port),
                (io_running, io_connecting, sql_running, source_refused),
                retrieved,
                lag_seconds,
                last_error,
            )| {
                Replication {
                    source_host: addr(host).0,
                    source_port: port,
                    io_running,
                    io_connecting,
                    sql_running,
                    retrieved,
                    lag_seconds,
                    last_error,
                    source_refused,
                }
            },
        )
}

fn server_state() -> impl Strategy<Value = ServerState> {
    let server = (any::<(bool, bool, bool)>(), any_gtid_set(), prop::option::of(replication()), any::<Option<u64>>())
        .prop_map(|((read_only, semi_sync_source, semi_sync_active), executed, replication, uptime_seconds)| Server {
            read_only,
            executed,
            semi_sync_source,
            semi_sync_active,
            uptime_seconds,
            connection_id: uptime_seconds,
            replication,
            connection_errors: None,
            client_connections: None,
        });
    prop_oneof![1 => Just(ServerState::Unreachable("timed out".into())), 3 => server.prop_map(ServerState::Up)]
}

fn member(ordinal: u32) -> impl Strategy<Value = Member> {
    let label =
        prop::option::of(prop_oneof![Just("primary".to_string()), Just("replica".to_string()), Just("x".into())]);
    (pod_state(), label, any::<bool>(), server_state(), prop_oneof![Just(ordinal), self::ordinal()], any::<u32>())
        .prop_map(move |(pod, role_label, reads_label, server, address, unreachable_passes)| Member {
            ordinal,
            pod,
            role_label,
            reads_label,
            server,
            address: addr(address),
            unreachable_passes: unreachable_passes % 6,
        })
}

/// Any observation the gatherer could produce (ordinals unique, as the gatherer lists one
/// member per pod), and many it could not.
fn any_observed() -> impl Strategy<Value = Observed> {
    let members = prop::collection::btree_set(ordinal(), 0..6)
        .prop_flat_map(|ordinals| ordinals.into_iter().map(member).collect::<Vec<_>>());
    let heal = (any::<bool>(), prop::option::of(0..100u64), prop::collection::btree_map(ordinal(), 0..200u64, 0..3))
        .prop_map(|(reseed_errant, after, broken)| Healing {
            reseed_errant,
            reseed_broken_after: after.map(Duration::from_secs),
            broken_for: broken.into_iter().map(|(k, s)| (k, Duration::from_secs(s))).collect(),
        });
    (
        // `spec.replicas` is 1, 3 or 5 (CRD schema), 0 when stopped: a little beyond that.
        // (`bootstrap` lists the missing servers one by one: u32::MAX would exhaust memory.)
        (0..8u32, prop::bool::weighted(0.1), any::<bool>(), prop_oneof![0..4u32, Just(u32::MAX)]),
        (prop::option::of(ordinal()), prop::option::weighted(0.2, ordinal())),
        members,
        heal,
        prop::collection::btree_set((ordinal(), ordinal()), 0..3),
        prop::collection::btree_map(ordinal(), prop::option::of(any_gtid_set()), 0..3),
        (prop::option::of(ordinal()), prop::collection::btree_set(ordinal(), 0..3)),
    )
        .prop_map(
            |(
                (replicas, paused, semi_sync, ack_count),
                (recorded_primary, switchover_to),
                members,
                heal,
                recently_configured,
                restarted,
                (deposed, routed),
            )| {
                Observed {
                    replicas,
                    paused,
                    semi_sync,
                    ack_count,
                    recorded_primary,
                    switchover_to,
                    members,
                    heal,
                    recently_configured,
                    restarted,
                    deposed,
                    routed,
                }
            },
        )
}
