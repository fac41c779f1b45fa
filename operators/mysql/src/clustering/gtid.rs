//! GTID sets of both flavors, parsed into one shape so that the decisions ("is this
//! replica's history contained in the primary's?", "which candidate has everything the
//! others have?") are the same code for MariaDB and MySQL.
//!
//! - MySQL: `uuid:1-5:7,uuid2:1-3`, a set of intervals per source UUID.
//! - MariaDB: `domain-server-seq,...`, the *last* GTID of each replication domain. Within a
//!   domain sequence numbers grow monotonically (`gtid_strict_mode`), so the position stands
//!   for `1..=seq` of that domain; the server id of the last GTID is kept to detect two
//!   servers that reached the same sequence number by different transactions.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::api::Flavor;

/// A GTID string the parser did not understand.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("malformed GTID set {input:?}: {why}")]
pub struct GtidParseError {
    /// The text received from the server.
    pub input: String,
    /// What was wrong.
    pub why: &'static str,
}

/// A GTID set: per source (MySQL UUID or MariaDB domain id) the sorted, disjoint, inclusive
/// intervals of transaction numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GtidSet {
    sources: BTreeMap<String, Vec<(u64, u64)>>,
    /// MariaDB only: the server id of the last GTID of each domain.
    last_server: BTreeMap<String, u64>,
}

impl GtidSet {
    /// Parses the flavor's text form. Empty text is the empty set.
    pub fn parse(flavor: Flavor, text: &str) -> Result<Self, GtidParseError> {
        match flavor {
            Flavor::Mariadb => Self::parse_mariadb(text),
            Flavor::Mysql => Self::parse_mysql(text),
        }
    }

    fn parse_mariadb(text: &str) -> Result<Self, GtidParseError> {
        let err = |why| GtidParseError { input: text.to_string(), why };
        let mut set = GtidSet::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split('-');
            let (Some(domain), Some(server), Some(seq), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(err("expected domain-server-sequence"));
            };
            let domain: u32 = domain.parse().map_err(|_| err("domain is not a number"))?;
            let server: u64 = server.parse().map_err(|_| err("server id is not a number"))?;
            let seq: u64 = seq.parse().map_err(|_| err("sequence is not a number"))?;
            let key = domain.to_string();
            if set.sources.contains_key(&key) {
                return Err(err("a domain appears twice"));
            }
            if seq > 0 {
                set.sources.insert(key.clone(), vec![(1, seq)]);
                set.last_server.insert(key, server);
            }
        }
        Ok(set)
    }

    fn parse_mysql(text: &str) -> Result<Self, GtidParseError> {
        let err = |why| GtidParseError { input: text.to_string(), why };
        let mut set = GtidSet::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split(':');
            let uuid = fields.next().unwrap_or_default().to_ascii_lowercase();
            if uuid.len() != 36 || !uuid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                return Err(err("expected a source UUID"));
            }
            let mut intervals = Vec::new();
            for iv in fields {
                let (lo, hi) = match iv.split_once('-') {
                    Some((lo, hi)) => (lo, hi),
                    None => (iv, iv),
                };
                let lo: u64 = lo.parse().map_err(|_| err("interval bound is not a number"))?;
                let hi: u64 = hi.parse().map_err(|_| err("interval bound is not a number"))?;
                if lo == 0 || hi < lo {
                    return Err(err("empty or zero interval"));
                }
                intervals.push((lo, hi));
            }
            if intervals.is_empty() {
                return Err(err("a source without intervals"));
            }
            let entry = set.sources.entry(uuid).or_default();
            entry.extend(intervals);
            *entry = normalize(std::mem::take(entry));
        }
        Ok(set)
    }

    /// No transaction at all (a new server).
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Number of transactions in the set (for status and metrics).
    pub fn len(&self) -> u64 {
        // Saturating: the intervals come from a server, and a hostile or corrupt answer must
        // not overflow (a panic in debug builds, a wrong count in release builds).
        self.sources
            .values()
            .flatten()
            .map(|(lo, hi)| hi.saturating_sub(*lo).saturating_add(1))
            .fold(0, u64::saturating_add)
    }

    /// Every transaction of `other` is in `self`. For MariaDB, two positions at the same
    /// sequence of a domain with different server ids are different histories: not
    /// contained.
    pub fn contains(&self, other: &GtidSet) -> bool {
        other.sources.iter().all(|(source, theirs)| {
            let Some(ours) = self.sources.get(source) else { return false };
            let covered = theirs.iter().all(|iv| ours.iter().any(|o| o.0 <= iv.0 && iv.1 <= o.1));
            let same_last = match (self.last_server.get(source), other.last_server.get(source)) {
                (Some(a), Some(b)) => a == b || ours.last().map(|o| o.1) != theirs.last().map(|t| t.1),
                _ => true,
            };
            covered && same_last
        })
    }

    /// The part of `self` that `other` lacks, as text; empty when `other` contains `self`.
    /// Used to name errant transactions in status and Events.
    pub fn missing_from(&self, other: &GtidSet) -> String {
        let mut out = Vec::new();
        for (source, ours) in &self.sources {
            let single = GtidSet {
                sources: BTreeMap::from([(source.clone(), ours.clone())]),
                last_server: self
                    .last_server
                    .get(source)
                    .map(|s| BTreeMap::from([(source.clone(), *s)]))
                    .unwrap_or_default(),
            };
            if !other.contains(&single) {
                let last = ours.last().map(|o| o.1).unwrap_or_default();
                match self.last_server.get(source) {
                    Some(server) => out.push(format!("{source}-{server}-{last}")),
                    None => out.push(format!(
                        "{source}:{}",
                        ours.iter().map(|(lo, hi)| format!("{lo}-{hi}")).collect::<Vec<_>>().join(":")
                    )),
                }
            }
        }
        out.join(",")
    }

    /// Neither set contains the other: the servers went different ways and promoting
    /// either would lose the other's transactions.
    pub fn conflicts_with(&self, other: &GtidSet) -> bool {
        !self.contains(other) && !other.contains(self)
    }
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .sources
            .iter()
            .map(|(source, ivs)| match self.last_server.get(source) {
                Some(server) => format!("{source}-{server}-{}", ivs.last().map(|o| o.1).unwrap_or_default()),
                None => format!(
                    "{source}:{}",
                    ivs.iter()
                        .map(|(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
                        .collect::<Vec<_>>()
                        .join(":")
                ),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Sorts and merges overlapping or adjacent intervals.
fn normalize(mut ivs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ivs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ivs.len());
    for (lo, hi) in ivs {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maria(s: &str) -> GtidSet {
        GtidSet::parse(Flavor::Mariadb, s).unwrap()
    }
    fn mysql(s: &str) -> GtidSet {
        GtidSet::parse(Flavor::Mysql, s).unwrap()
    }
    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "4f22ab58-82db-22f2-af44-d91bb0530673";

    #[test]
    fn mariadb_positions_compare_per_domain() {
        let primary = maria("0-101-10,1-102-3");
        assert!(primary.contains(&maria("0-101-7")));
        assert!(primary.contains(&maria("0-101-10,1-102-3")));
        assert!(primary.contains(&maria("")));
        assert!(!primary.contains(&maria("0-101-11")), "a replica ahead of the primary is errant");
        assert!(!primary.contains(&maria("2-103-1")), "a domain the primary never saw is errant");
        assert_eq!(maria("0-101-11").missing_from(&primary), "0-101-11");
        assert_eq!(maria("0-101-7").missing_from(&primary), "");
        assert!(maria("").is_empty() && maria("0-101-0").is_empty());
        assert_eq!(primary.len(), 13);
        assert_eq!(primary.to_string(), "0-101-10,1-102-3");
    }

    #[test]
    fn mariadb_same_sequence_from_different_servers_conflicts() {
        let a = maria("0-101-10");
        let b = maria("0-102-10");
        assert!(a.conflicts_with(&b));
        assert!(!a.conflicts_with(&maria("0-102-9")), "positions behind are assumed to be the same history");
    }

    #[test]
    fn mysql_sets_compare_by_interval() {
        let primary = mysql(&format!("{U1}:1-10:12-20,{U2}:1-5"));
        assert!(primary.contains(&mysql(&format!("{U1}:3-8:15"))));
        assert!(!primary.contains(&mysql(&format!("{U1}:11"))), "a hole in the primary");
        assert!(!primary.contains(&mysql(&format!("{U2}:1-6"))));
        assert_eq!(mysql(&format!("{U1}:1-5:6-8,\n{U1}:9")).to_string(), format!("{U1}:1-9"));
        assert_eq!(mysql(&format!("{U2}:1-6")).missing_from(&primary), format!("{U2}:1-6"));
        let a = mysql(&format!("{U1}:1-5"));
        let b = mysql(&format!("{U1}:1-4,{U2}:1"));
        assert!(a.conflicts_with(&b));
        assert_eq!(mysql(&format!("{}:1-3", U1.to_uppercase())), mysql(&format!("{U1}:1-3")));
    }

    #[test]
    fn malformed_sets_are_errors_naming_the_input() {
        for (flavor, bad) in [
            (Flavor::Mariadb, "0-101"),
            (Flavor::Mariadb, "x-1-2"),
            (Flavor::Mariadb, "0-1-2,0-1-3"),
            (Flavor::Mysql, "not-a-uuid:1-2"),
            (Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562"),
            (Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-2"),
        ] {
            let e = GtidSet::parse(flavor, bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }
}
