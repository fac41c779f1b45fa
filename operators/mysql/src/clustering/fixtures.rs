//! Hand-built observations for the unit tests of pure decisions (the fake data plane):
//! a writable primary, healthy replicas of it, and a cluster of them, which each test
//! then bends into the state it is about.

use super::gtid::GtidSet;
use super::heal::Healing;
use super::observed::{Member, Observed, PodState, Replication, Server, ServerState};
use crate::api::Flavor;

/// A MariaDB GTID position or set.
pub fn g(s: &str) -> GtidSet {
    GtidSet::parse(Flavor::Mariadb, s).unwrap()
}

/// The address replicas are given for member `i`.
pub fn addr(i: u32) -> (String, u16) {
    (format!("db-{i}.db-hl.ns.svc"), 3306)
}

/// A writable primary `i` that has executed `gtid`.
pub fn primary(i: u32, gtid: &str) -> Member {
    Member {
        ordinal: i,
        pod: PodState::Running { ready: true },
        role_label: Some("primary".into()),
        reads_label: false,
        address: addr(i),
        server: ServerState::Up(Server {
            read_only: false,
            executed: g(gtid),
            semi_sync_source: true,
            semi_sync_active: true,
            uptime_seconds: None,
            connection_id: None,
            replication: None,
            connection_errors: None,
            client_connections: None,
        }),
        unreachable_passes: 0,
    }
}

/// A healthy replica `i` of `of` that has executed (and received) `gtid`.
pub fn replica(i: u32, of: u32, gtid: &str) -> Member {
    Member {
        ordinal: i,
        pod: PodState::Running { ready: true },
        role_label: Some("replica".into()),
        reads_label: true,
        address: addr(i),
        server: ServerState::Up(Server {
            read_only: true,
            executed: g(gtid),
            semi_sync_source: false,
            semi_sync_active: false,
            uptime_seconds: None,
            connection_id: None,
            replication: Some(Replication {
                source_host: addr(of).0,
                source_port: 3306,
                io_running: true,
                io_connecting: false,
                sql_running: true,
                retrieved: g(gtid),
                lag_seconds: Some(0),
                last_error: None,
                source_refused: false,
            }),
            connection_errors: None,
            client_connections: None,
        }),
        unreachable_passes: 0,
    }
}

/// The server of an answering member, to change what it reports.
pub fn server(m: &mut Member) -> &mut Server {
    match &mut m.server {
        ServerState::Up(s) => s,
        ServerState::Unreachable(_) | ServerState::Refused(_) => panic!("member is down"),
    }
}

/// The cluster of `members` (as many wanted as given), member 0 recorded as primary.
pub fn cluster(members: Vec<Member>) -> Observed {
    Observed {
        replicas: members.len() as u32,
        paused: false,
        semi_sync: true,
        ack_count: 1,
        recorded_primary: Some(0),
        switchover_to: None,
        members,
        heal: Healing::default(),
        recently_configured: Default::default(),
        restarted: Default::default(),
        deposed: None,
        routed: Default::default(),
    }
}
