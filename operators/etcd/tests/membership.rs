//! The membership planner and data plane against real etcd processes: each test drives
//! the loop `gather → plan → perform` (with the harness playing Kubernetes) until the
//! planner is idle, and checks what etcd ends up with.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, CompactionOptions};
use statecraft_etcd::membership::dataplane;
use statecraft_etcd::membership::plan::{Addressing, DefragPolicy, Desired, Memory, Step};
use statecraft_etcd::membership::{Alarm, Observed};
use statecraft_etcd::reason::Etcd;
use support::{Harness, SERIAL, Writer, desired, id_of, keys, leader};

/// Long enough never to replace anything in tests that are not about it.
const NEVER: Duration = Duration::from_secs(3600);
const LIMIT: Duration = Duration::from_secs(60);

/// The actions among `steps` (waits left out), as `Reason ordinal`.
fn actions(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| {
            let ordinal = match s {
                Step::Wait { .. } | Step::Idle => return None,
                Step::Bootstrap | Step::RecoverNoSpace | Step::ClearAlarm { .. } => None,
                Step::AddLearner { ordinal }
                | Step::DeleteStaleClaim { ordinal }
                | Step::RestartPod { ordinal }
                | Step::Promote { ordinal, .. }
                | Step::Remove { ordinal, .. }
                | Step::Replace { ordinal, .. }
                | Step::Defragment { ordinal, .. } => Some(*ordinal),
                Step::MoveLeader { from_ordinal, .. } => Some(*from_ordinal),
            };
            Some(match ordinal {
                Some(k) => format!("{} {k}", s.reason()),
                None => s.reason().to_string(),
            })
        })
        .collect()
}

/// `actions` without volume clean-ups, whose order relative to the next removal depends
/// on when the StatefulSet deletes the pod.
fn membership_actions(steps: &[Step]) -> Vec<String> {
    actions(steps).into_iter().filter(|a| !a.starts_with("DeleteStaleClaim")).collect()
}

/// Performs `step` directly, waiting out etcd's refusals right after a membership change
/// (its strict reconfiguration check wants every voter connected for 5 s).
async fn perform(h: &Harness, step: &Step) {
    let started = Instant::now();
    loop {
        match dataplane::perform(&h.addressing, &h.endpoints(), step).await {
            Ok(()) => return,
            Err(e) if e.wait_reason().is_some() && started.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{step:?}: {e}"),
        }
    }
}

/// One pass after another, each by a new operator (no memory), until one acts; then the
/// operator "dies". The step it took.
async fn first_action(h: &mut Harness, replicas: u32) -> Step {
    let started = Instant::now();
    loop {
        let step = h.pass(&desired(replicas, NEVER), &mut Memory::default()).await;
        if !step.is_wait() {
            return step;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no action: {step:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A fresh cluster of `n` members, bootstrapped and grown by the loop itself.
async fn cluster(name: &str, n: u32, extra_args: &[&str]) -> (Harness, Memory) {
    let mut h = Harness::new(name, extra_args);
    let mut memory = Memory::default();
    let steps = h.converge(&desired(n, NEVER), &mut memory, LIMIT).await;
    assert_eq!(steps.first(), Some(&Step::Bootstrap));
    h.assert_voters(&(0..n).collect::<Vec<_>>()).await;
    (h, memory)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_1_3_5_3_1_without_losing_an_acknowledged_write() {
    let _serial = SERIAL.lock().await;
    let (mut h, mut memory) = cluster("scale", 1, &[]).await;
    let writer = Writer::start(h.addressing.client_url(0)).await;

    let steps = h.converge(&desired(3, NEVER), &mut memory, LIMIT).await;
    assert_eq!(actions(&steps), ["AddLearner 1", "Promote 1", "AddLearner 2", "Promote 2"]);
    h.assert_voters(&[0, 1, 2]).await;

    let started = Instant::now();
    let steps = h.converge(&desired(5, NEVER), &mut memory, LIMIT).await;
    let out = started.elapsed();
    assert_eq!(actions(&steps), ["AddLearner 3", "Promote 3", "AddLearner 4", "Promote 4"]);
    h.assert_voters(&[0, 1, 2, 3, 4]).await;

    let started = Instant::now();
    let steps = h.converge(&desired(3, NEVER), &mut memory, LIMIT).await;
    let shrink = started.elapsed();
    let removals: Vec<String> = membership_actions(&steps).into_iter().filter(|a| a.starts_with("Remove")).collect();
    assert_eq!(removals, ["RemoveMember 4", "RemoveMember 3"]);
    let o = h.assert_voters(&[0, 1, 2]).await;
    assert_eq!(o.claims, BTreeSet::from([0, 1, 2]), "volumes of removed members deleted");

    let steps = h.converge(&desired(1, NEVER), &mut memory, LIMIT).await;
    let removals: Vec<String> = membership_actions(&steps).into_iter().filter(|a| a.starts_with("Remove")).collect();
    assert_eq!(removals, ["RemoveMember 2", "RemoveMember 1"]);
    h.assert_voters(&[0]).await;

    let (acked, attempts) = writer.stop().await;
    let present: BTreeSet<String> = keys(&mut h.client(0).await, "w/").await.into_iter().collect();
    let lost: Vec<&String> = acked.iter().filter(|k| !present.contains(*k)).collect();
    eprintln!(
        "writes: {} acknowledged of {attempts} attempted, {} lost; 3->5 took {:.1} s, 5->3 took {:.1} s \
         (wall clock from the spec change to an idle planner, passes 100-300 ms apart)",
        acked.len(),
        lost.len(),
        out.as_secs_f64(),
        shrink.as_secs_f64()
    );
    assert!(acked.len() > 200, "the writer kept writing through the changes: {}", acked.len());
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_that_lost_its_data_is_replaced() {
    let _serial = SERIAL.lock().await;
    let replace_after = Duration::from_secs(4);
    let (mut h, mut memory) = cluster("wiped", 3, &[]).await;
    let old = id_of(&h.observe().await, 1);

    h.wipe(1).await;
    let started = Instant::now();
    let d = desired(3, replace_after);
    let steps = h.converge(&d, &mut memory, LIMIT).await;
    let total = started.elapsed();
    let replace_at = h.log.iter().rposition(|l| matches!(l.step, Step::Replace { .. })).unwrap();
    let since_replace = h.log[replace_at].at.elapsed();
    assert!(steps.contains(&Step::Replace { id: old, ordinal: 1 }), "{steps:?}");
    assert_eq!(
        membership_actions(&steps),
        ["ReplaceMember 1", "AddLearner 1", "RestartPod 1", "Promote 1"],
        "the pod recreated before its membership is restarted once, then joins"
    );
    assert!(steps.iter().any(|s| s.reason() == Etcd::MemberUnhealthy), "reported before replacing");
    let o = h.assert_voters(&[0, 1, 2]).await;
    assert_ne!(id_of(&o, 1), old, "a new member");
    let passes_after_replace = h.log.len() - replace_at;
    eprintln!(
        "replacement: {:.1} s from the data loss to 3 healthy voters: replace_after {} s, then {:.1} s \
         and {passes_after_replace} passes (remove, re-add as learner, restart its early pod, promote)",
        total.as_secs_f64(),
        replace_after.as_secs(),
        since_replace.as_secs_f64()
    );
    let mut c = h.client(1).await;
    c.put("after", "replacement", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_killed_between_steps_converges_without_a_half_added_member() {
    let _serial = SERIAL.lock().await;
    let (mut h, _) = cluster("killed", 3, &[]).await;

    // Killed right after adding a learner: a new operator (no memory) finishes the job.
    assert_eq!(first_action(&mut h, 5).await, Step::AddLearner { ordinal: 3 });
    let steps = h.converge(&desired(5, NEVER), &mut Memory::default(), LIMIT).await;
    assert_eq!(actions(&steps), ["Promote 3", "AddLearner 4", "Promote 4"]);
    h.assert_voters(&[0, 1, 2, 3, 4]).await;

    // Killed after adding a learner, and the spec shrank meanwhile: the learner goes.
    assert_eq!(first_action(&mut h, 7).await, Step::AddLearner { ordinal: 5 });
    let steps = h.converge(&desired(5, NEVER), &mut Memory::default(), LIMIT).await;
    assert_eq!(membership_actions(&steps), ["RemoveMember 5"]);
    let o = h.assert_voters(&[0, 1, 2, 3, 4]).await;
    assert_eq!(o.claims, (0..5).collect::<BTreeSet<u32>>(), "no volume left behind");
    assert!(!o.pods.contains_key(&5), "no pod left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_killed_inside_a_replacement_converges() {
    let _serial = SERIAL.lock().await;
    let replace_after = Duration::from_secs(4);
    let (mut h, _) = cluster("midreplace", 3, &[]).await;
    let o = h.observe().await;
    let old = id_of(&o, 1);
    // The etcd half of a replacement, then the operator dies before deleting the pod and
    // its volume: member 1's process keeps its stale data (it is removed, so it exits).
    perform(&h, &Step::Replace { id: old, ordinal: 1 }).await;
    let steps = h.converge(&desired(3, replace_after), &mut Memory::default(), LIMIT).await;
    let o = h.assert_voters(&[0, 1, 2]).await;
    assert_ne!(id_of(&o, 1), old);
    eprintln!("after a crash inside a replacement: {:?}", membership_actions(&steps));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_hands_over_before_it_is_removed() {
    let _serial = SERIAL.lock().await;
    let (mut h, mut memory) = cluster("leader", 3, &[]).await;
    let o = h.observe().await;
    let (id0, id2) = (id_of(&o, 0), id_of(&o, 2));
    let current = leader(&o).unwrap();
    if current != id2 {
        let from_ordinal = o.members.as_ref().unwrap().iter().find(|m| m.id == current).unwrap().ordinal.unwrap();
        let to_two = Step::MoveLeader { from: current, from_ordinal, to: id2, to_ordinal: 2 };
        perform(&h, &to_two).await;
    }
    assert_eq!(leader(&h.observe().await), Some(id2));

    let steps = h.converge(&desired(1, NEVER), &mut memory, LIMIT).await;
    assert_eq!(membership_actions(&steps), ["MoveLeader 2", "RemoveMember 2", "RemoveMember 1"]);
    assert!(steps.contains(&Step::MoveLeader { from: id2, from_ordinal: 2, to: id0, to_ordinal: 0 }));
    let removal = h.log.iter().find(|l| matches!(l.step, Step::Remove { ordinal: 2, .. })).unwrap();
    assert_eq!(removal.leader, Some(id0), "member 2 no longer led when it was removed");
    h.assert_voters(&[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_with_free_space_are_defragmented_followers_first() {
    let _serial = SERIAL.lock().await;
    let (mut h, mut memory) = cluster("defrag", 3, &[]).await;
    let mut c = h.client(0).await;
    let value = vec![b'x'; 16 << 10];
    for i in 0..300 {
        c.put(format!("bulk/{i}"), value.clone(), None).await.unwrap();
    }
    let deleted = c.delete("bulk/", Some(etcd_client::DeleteOptions::new().with_prefix())).await.unwrap();
    assert_eq!(deleted.deleted(), 300);
    let revision = deleted.header().unwrap().revision();
    c.compact(revision, Some(CompactionOptions::new().with_physical())).await.unwrap();

    // Followers apply the compaction on their own time.
    let fragmented = |o: &Observed| {
        o.states.len() == 3 && o.states.values().all(|s| s.db_size > 4 << 20 && s.db_size_in_use * 2 < s.db_size)
    };
    let mut before = h.observe().await;
    let started = Instant::now();
    while !fragmented(&before) {
        assert!(started.elapsed() < Duration::from_secs(20), "compaction applied everywhere: {:?}", before.states);
        // bbolt frees the pages a compaction released at a member's next write.
        c.put("tick", "", None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        before = h.observe().await;
    }
    let leader_ordinal = before.members.as_ref().unwrap().iter().find(|m| Some(m.id) == leader(&before)).unwrap();
    let leader_ordinal = leader_ordinal.ordinal.unwrap();
    let policy = DefragPolicy { threshold_percent: 50, min_db_size: 1 << 20 };
    let d = Desired { defrag: Some(policy), ..desired(3, NEVER) };
    let steps = h.converge(&d, &mut memory, LIMIT).await;
    let order: Vec<String> = actions(&steps);
    assert_eq!(order.len(), 3, "{order:?}");
    assert_eq!(order.last().unwrap(), &format!("Defragment {leader_ordinal}"), "leader last: {order:?}");
    let after = h.observe().await;
    for (id, s) in &after.states {
        let was = before.states[id].db_size;
        assert!(s.db_size * 2 < was, "member {id:x}: {was} -> {} bytes", s.db_size);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nospace_is_recovered() {
    let _serial = SERIAL.lock().await;
    let (mut h, mut memory) = cluster("nospace", 3, &["--quota-backend-bytes", "4194304"]).await;
    let mut c = h.client(0).await;
    let value = vec![b'x'; 64 << 10];
    let mut full = None;
    for i in 0..500 {
        if let Err(e) = c.put("big", value.clone(), None).await {
            full = Some((i, e.to_string()));
            break;
        }
    }
    let (puts, error) = full.expect("the quota is reached");
    assert!(error.contains("database space exceeded"), "{error}");
    let o = h.observe().await;
    assert!(o.alarms.values().any(|a| a.contains(&Alarm::NoSpace)), "{:?}", o.alarms);

    let steps = h.converge(&desired(3, NEVER), &mut memory, LIMIT).await;
    assert_eq!(actions(&steps), ["RecoverNoSpace"]);
    let o = h.observe().await;
    assert!(o.alarms.is_empty(), "{:?}", o.alarms);
    for s in o.states.values() {
        assert!(s.db_size < 1 << 20, "defragmented: {s:?}");
    }
    for i in 0..10 {
        c.put(format!("after/{i}"), value.clone(), None).await.unwrap();
    }
    eprintln!("NOSPACE after {puts} puts of 64 KiB under a 4 MiB quota; recovered, writes accepted again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_member_is_replaced_and_the_alarm_cleared() {
    let _serial = SERIAL.lock().await;
    let (mut h, mut memory) = cluster("corrupt", 3, &[]).await;
    let o = h.observe().await;
    let bad = id_of(&o, 1);
    let mut c = h.client(0).await;
    let mut options = AlarmOptions::new();
    options.with_member(bad);
    c.alarm(AlarmAction::Activate, AlarmType::Corrupt, Some(options)).await.unwrap();
    let blocked = c.put("k", "v", None).await;
    assert!(blocked.is_err(), "a CORRUPT alarm blocks writes");

    let steps = h.converge(&desired(3, NEVER), &mut memory, LIMIT).await;
    let done = membership_actions(&steps);
    assert!(done.contains(&"ReplaceMember 1".to_owned()), "{done:?}");
    let o = h.assert_voters(&[0, 1, 2]).await;
    assert_ne!(id_of(&o, 1), bad);
    assert!(o.alarms.is_empty(), "{:?}", o.alarms);
    c.put("k", "v", None).await.unwrap();
}
