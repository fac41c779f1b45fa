//! Which backups to delete. A pure function, so that the rules are tested without a server.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::ObjectInfo;

/// How many and how old backups to keep.
///
/// Semantics, chosen so that a mistake keeps too much rather than too little:
///
/// - An object is **kept** if it is among the `keep_last` newest, **or** younger than
///   `max_age`. It is deleted only if it fails every criterion that is set.
/// - A criterion that is `None` keeps nothing by itself; but if **both** are `None` the
///   policy is empty and **nothing** is deleted (not everything).
/// - The newest object is **always** kept, whatever the policy (`keep_last: Some(0)`, or a
///   `max_age` that every object exceeds because backups stopped running): retention must
///   never leave a cluster without any backup.
/// - "Newest" is by `last_modified`, ties broken by key (greater key is newer, which holds
///   for timestamped names). Age is `now - last_modified`; objects from the future (clock
///   skew) count as age zero. An object exactly `max_age` old is deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Keep the N newest objects.
    pub keep_last: Option<u32>,
    /// Keep objects younger than this.
    pub max_age: Option<Duration>,
}

impl RetentionPolicy {
    /// Whether the policy deletes nothing because no criterion is set.
    pub fn is_empty(&self) -> bool {
        self.keep_last.is_none() && self.max_age.is_none()
    }
}

/// The objects to delete under `policy` at time `now`, oldest first (so that a deletion
/// run interrupted half-way has removed the least valuable objects). See
/// [`RetentionPolicy`] for the exact rules.
pub fn select_for_deletion(objects: &[ObjectInfo], policy: &RetentionPolicy, now: DateTime<Utc>) -> Vec<ObjectInfo> {
    if policy.is_empty() {
        return Vec::new();
    }
    let mut newest_first: Vec<&ObjectInfo> = objects.iter().collect();
    newest_first.sort_by(|a, b| b.last_modified.cmp(&a.last_modified).then_with(|| b.key.cmp(&a.key)));
    let keep_last = policy.keep_last.map_or(0, |n| n as usize).max(1);
    let mut doomed: Vec<ObjectInfo> = newest_first
        .into_iter()
        .enumerate()
        .filter(|(rank, o)| {
            let kept_by_count = *rank < keep_last;
            let kept_by_age = policy.max_age.is_some_and(|max| {
                // Negative ages (future timestamps) convert to an error: treat as zero.
                let age = (now - o.last_modified).to_std().unwrap_or(Duration::ZERO);
                age < max
            });
            !kept_by_count && !kept_by_age
        })
        .map(|(_, o)| o.clone())
        .collect();
    doomed.reverse();
    doomed
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).expect("valid timestamp")
    }

    /// Objects "b0".."b{n-1}", b{i} being i hours old.
    fn backups(n: u32) -> Vec<ObjectInfo> {
        (0..n).map(|i| ObjectInfo { key: format!("b{i}"), size: 1, last_modified: now() - HOUR * i }).collect()
    }

    fn keys(v: &[ObjectInfo]) -> Vec<&str> {
        v.iter().map(|o| o.key.as_str()).collect()
    }

    fn policy(keep_last: Option<u32>, max_age: Option<Duration>) -> RetentionPolicy {
        RetentionPolicy { keep_last, max_age }
    }

    #[test]
    fn empty_policy_deletes_nothing() {
        assert!(select_for_deletion(&backups(10), &RetentionPolicy::default(), now()).is_empty());
    }

    #[test]
    fn keep_last_keeps_the_newest_and_deletes_oldest_first() {
        let mut objects = backups(5);
        objects.reverse(); // input order must not matter
        assert_eq!(keys(&select_for_deletion(&objects, &policy(Some(2), None), now())), ["b4", "b3", "b2"]);
        assert!(select_for_deletion(&objects, &policy(Some(5), None), now()).is_empty());
        assert!(select_for_deletion(&objects, &policy(Some(50), None), now()).is_empty());
    }

    #[test]
    fn max_age_keeps_younger_objects_and_deletes_at_the_boundary() {
        let d = select_for_deletion(&backups(5), &policy(None, Some(HOUR * 2)), now());
        assert_eq!(keys(&d), ["b4", "b3", "b2"]); // b2 is exactly 2 h old: deleted
    }

    #[test]
    fn either_criterion_keeps_an_object() {
        // Newest 1 OR younger than 3 h: b0, b1, b2 kept.
        let d = select_for_deletion(&backups(6), &policy(Some(1), Some(HOUR * 3)), now());
        assert_eq!(keys(&d), ["b5", "b4", "b3"]);
        // Newest 4 OR younger than 1 h: count wins.
        let d = select_for_deletion(&backups(6), &policy(Some(4), Some(HOUR)), now());
        assert_eq!(keys(&d), ["b5", "b4"]);
    }

    #[test]
    fn the_newest_object_always_survives() {
        let d = select_for_deletion(&backups(3), &policy(Some(0), None), now());
        assert_eq!(keys(&d), ["b2", "b1"]);
        // All older than max_age: backups stopped a while ago. The newest is kept.
        let old: Vec<ObjectInfo> =
            backups(3).into_iter().map(|o| ObjectInfo { last_modified: o.last_modified - HOUR * 1000, ..o }).collect();
        assert_eq!(keys(&select_for_deletion(&old, &policy(None, Some(HOUR)), now())), ["b2", "b1"]);
        assert!(select_for_deletion(&[], &policy(Some(0), Some(HOUR)), now()).is_empty());
    }

    #[test]
    fn ties_and_future_timestamps() {
        let t = now() - HOUR * 10;
        let objects: Vec<ObjectInfo> = ["x-1", "x-3", "x-2"]
            .iter()
            .map(|k| ObjectInfo { key: (*k).to_owned(), size: 0, last_modified: t })
            .collect();
        assert_eq!(keys(&select_for_deletion(&objects, &policy(Some(1), None), now())), ["x-1", "x-2"]);
        let future = vec![
            ObjectInfo { key: "f".into(), size: 0, last_modified: now() + HOUR },
            ObjectInfo { key: "old".into(), size: 0, last_modified: now() - HOUR * 5 },
        ];
        assert_eq!(keys(&select_for_deletion(&future, &policy(None, Some(HOUR)), now())), ["old"]);
    }
}
