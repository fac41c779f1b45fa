//! Property tests of [`GtidSet`] over generated sets of both flavors: every decision of the
//! clustering task ("is this replica's history in the primary's?", "which candidate has
//! everything?") rests on `contains`, so it is checked against a plain model (a set of
//! transaction numbers) and for the laws the decisions assume (reflexive, transitive), with
//! bounds up to `u64::MAX` where a server's answer could overflow a count.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::gtid::GtidSet;
use crate::api::Flavor;

/// Source UUIDs: few, so that generated sets share sources and overlap.
const UUIDS: [&str; 3] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4f22ab58-82db-22f2-af44-d91bb0530673",
    "00000000-0000-0000-0000-000000000000",
];

/// A MySQL interval bound: mostly small (so that sets overlap), sometimes at the top of
/// the range (a corrupt or hostile answer must not overflow anything).
fn bound() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 1..40u64, 1 => (u64::MAX - 3)..=u64::MAX, 1 => 1..=u64::MAX]
}

/// A MySQL GTID set as text: intervals per source, possibly unsorted, overlapping, with a
/// source repeated and the UUID in upper case (all of which servers may print).
fn mysql_text() -> impl Strategy<Value = String> {
    let interval = (bound(), bound()).prop_map(|(a, b)| (a.min(b), a.max(b)));
    let part = (0..UUIDS.len(), prop::collection::vec(interval, 1..4), any::<bool>()).prop_map(|(u, ivs, upper)| {
        let uuid = if upper { UUIDS[u].to_uppercase() } else { UUIDS[u].to_string() };
        let ivs: Vec<String> =
            ivs.iter().map(|(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }).collect();
        format!("{uuid}:{}", ivs.join(":"))
    });
    prop::collection::vec(part, 0..4).prop_map(|parts| parts.join(","))
}

/// A MariaDB position per domain: `(server id, sequence)`. Few domains and server ids, so
/// that two positions often meet in a domain, sometimes at the same sequence.
type MariaModel = BTreeMap<u32, (u64, u64)>;

fn maria_model() -> impl Strategy<Value = MariaModel> {
    let domain = prop_oneof![0..3u32, Just(u32::MAX)];
    let server = prop_oneof![100..103u64, Just(u64::MAX)];
    let seq = prop_oneof![4 => 0..12u64, 1 => (u64::MAX - 2)..=u64::MAX];
    prop::collection::btree_map(domain, (server, seq), 0..4)
}

fn maria_text(m: &MariaModel) -> String {
    m.iter().map(|(d, (s, q))| format!("{d}-{s}-{q}")).collect::<Vec<_>>().join(",")
}

/// A chain `a ⊇ b` of MariaDB positions made from `a`: per domain, drop it, keep it, or
/// move it back (to any server id: a position behind is the same history).
fn maria_behind(a: &MariaModel, how: &[(u8, u64, u64)]) -> MariaModel {
    a.iter()
        .zip(how.iter().cycle())
        .filter_map(|((d, (s, q)), (choice, back, server))| match choice % 3 {
            0 => None,
            1 => Some((*d, (*s, *q))),
            _ if *q == 0 => None,
            _ => Some((*d, (*server, q - 1 - back % q))),
        })
        .collect()
}

fn parse(flavor: Flavor, text: &str) -> GtidSet {
    GtidSet::parse(flavor, text).unwrap_or_else(|e| panic!("generated text must parse: {e}"))
}

/// The transactions of a MySQL set with small bounds, one by one: the model `contains` is
/// checked against (subset of sets).
fn mysql_members(text: &str) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let mut fields = part.split(':');
        let uuid = fields.next().unwrap_or_default().to_ascii_lowercase();
        for iv in fields {
            let (lo, hi) = iv.split_once('-').unwrap_or((iv, iv));
            let (lo, hi): (u64, u64) = (lo.parse().unwrap(), hi.parse().unwrap());
            out.extend((lo..=hi).map(|n| (uuid.clone(), n)));
        }
    }
    out
}

/// Small MySQL sets only (the model enumerates their transactions).
fn small_mysql_text() -> impl Strategy<Value = String> {
    let interval = (1..30u64, 1..30u64).prop_map(|(a, b)| (a.min(b), a.max(b)));
    let part = (0..UUIDS.len(), prop::collection::vec(interval, 1..4)).prop_map(|(u, ivs)| {
        let ivs: Vec<String> = ivs.iter().map(|(lo, hi)| format!("{lo}-{hi}")).collect();
        format!("{}:{}", UUIDS[u], ivs.join(":"))
    });
    prop::collection::vec(part, 0..4).prop_map(|parts| parts.join(","))
}

/// The laws every flavor's sets keep; `a ⊇ b ⊇ c` by construction, `x` unrelated.
fn laws(a: &GtidSet, b: &GtidSet, c: &GtidSet, x: &GtidSet) -> Result<(), TestCaseError> {
    for s in [a, b, c, x] {
        prop_assert!(s.contains(s), "reflexive: {s}");
        prop_assert!(s.contains(&GtidSet::default()), "everything contains the empty set: {s}");
        prop_assert!(!s.conflicts_with(s));
        // Never panics, even with bounds at u64::MAX (saturating).
        let _ = s.len();
        prop_assert_eq!(s.is_empty(), matches!(s.len(), 0));
    }
    prop_assert!(a.contains(b) && b.contains(c), "the chain is built as a ⊇ b ⊇ c: {a} / {b} / {c}");
    prop_assert!(a.contains(c), "transitive: {a} ⊇ {b} ⊇ {c}");
    prop_assert!(a.len() >= b.len() && b.len() >= c.len(), "len is monotone: {a} / {b} / {c}");
    for (s, t) in [(a, x), (x, a), (b, x), (x, c), (a, b), (b, a)] {
        // The errant transactions are named exactly when there are some.
        let missing = s.missing_from(t);
        prop_assert_eq!(missing.is_empty(), t.contains(s), "{} missing from {}: {:?}", s, t, missing);
        prop_assert_eq!(s.conflicts_with(t), t.conflicts_with(s));
        prop_assert_eq!(s.conflicts_with(t), !s.contains(t) && !t.contains(s));
        if s.contains(t) && t.contains(s) {
            prop_assert_eq!(s, t, "mutual containment is equality");
        }
    }
    // Transitivity over unrelated sets too (rarely both hold, cheap to check).
    for (p, q, r) in [(x, a, c), (a, x, c), (b, c, x), (x, b, c)] {
        if p.contains(q) && q.contains(r) {
            prop_assert!(p.contains(r), "transitive: {p} ⊇ {q} ⊇ {r}");
        }
    }
    Ok(())
}

/// Printing and parsing again gives the same set (what status shows can be read back),
/// and printing is canonical.
fn round_trip(flavor: Flavor, s: &GtidSet) -> Result<(), TestCaseError> {
    let text = s.to_string();
    let again = parse(flavor, &text);
    prop_assert_eq!(&again, s, "{}", text);
    prop_assert_eq!(again.to_string(), text);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// MySQL sets: round trip, the laws, and the named errant transactions parse back into
    /// a part of the set that the other set lacks.
    #[test]
    fn mysql_sets_keep_the_laws(a in mysql_text(), extra_b in mysql_text(), extra_c in mysql_text(), x in mysql_text()) {
        // a ⊇ b ⊇ c: each set is the union of the next one and more.
        let c_text = extra_c;
        let b_text = format!("{c_text},{extra_b}");
        let a_text = format!("{b_text},{a}");
        let (a, b, c, x) = (
            parse(Flavor::Mysql, &a_text),
            parse(Flavor::Mysql, &b_text),
            parse(Flavor::Mysql, &c_text),
            parse(Flavor::Mysql, &x),
        );
        for s in [&a, &b, &c, &x] {
            round_trip(Flavor::Mysql, s)?;
        }
        laws(&a, &b, &c, &x)?;
        for (s, t) in [(&a, &x), (&x, &a)] {
            let missing = s.missing_from(t);
            let named = parse(Flavor::Mysql, &missing);
            prop_assert!(s.contains(&named), "named transactions are the set's own: {} ⊉ {}", s, missing);
            prop_assert!(missing.is_empty() || !t.contains(&named));
        }
    }

    /// MySQL `contains` is the subset relation of the transactions the sets stand for.
    #[test]
    fn mysql_contains_is_the_subset_relation(a in small_mysql_text(), b in small_mysql_text()) {
        let (sa, sb) = (parse(Flavor::Mysql, &a), parse(Flavor::Mysql, &b));
        let (ma, mb) = (mysql_members(&a), mysql_members(&b));
        prop_assert_eq!(sa.contains(&sb), ma.is_superset(&mb), "{} ⊇ {}", a, b);
        prop_assert_eq!(sa.len(), ma.len() as u64);
    }

    /// MariaDB positions: round trip, the laws over chains of positions behind each other,
    /// and `contains` against the position model (per domain: further, or as far from the
    /// same server).
    #[test]
    fn mariadb_positions_keep_the_laws(
        a in maria_model(),
        how_b in prop::collection::vec(any::<(u8, u64, u64)>(), 1..4),
        how_c in prop::collection::vec(any::<(u8, u64, u64)>(), 1..4),
        x in maria_model(),
    ) {
        let b = maria_behind(&a, &how_b);
        let c = maria_behind(&b, &how_c);
        let sets: Vec<GtidSet> = [&a, &b, &c, &x].iter().map(|m| parse(Flavor::Mariadb, &maria_text(m))).collect();
        for s in &sets {
            round_trip(Flavor::Mariadb, s)?;
        }
        laws(&sets[0], &sets[1], &sets[2], &sets[3])?;
        let model_contains = |p: &MariaModel, q: &MariaModel| {
            q.iter().filter(|(_, (_, seq))| *seq > 0).all(|(d, (server, seq))| {
                p.get(d).is_some_and(|(ps, pq)| pq > seq || (pq == seq && ps == server))
            })
        };
        for (p, q, sp, sq) in [(&a, &x, &sets[0], &sets[3]), (&x, &a, &sets[3], &sets[0]), (&x, &c, &sets[3], &sets[2])] {
            prop_assert_eq!(sp.contains(sq), model_contains(p, q), "{} ⊇ {}", sp, sq);
            let missing = sq.missing_from(sp);
            let named = parse(Flavor::Mariadb, &missing);
            prop_assert!(sq.contains(&named));
            prop_assert!(missing.is_empty() || !sp.contains(&named));
        }
    }

    /// Whatever a server (or a corrupt answer) sends, parsing never panics, and an error
    /// names the text.
    #[test]
    fn parsing_anything_never_panics(text in "[0-9a-fA-F:,\\- \n+]{0,60}|\\PC{0,40}") {
        for flavor in [Flavor::Mariadb, Flavor::Mysql] {
            match GtidSet::parse(flavor, &text) {
                Ok(s) => {
                    let _ = (s.len(), s.to_string(), s.missing_from(&GtidSet::default()));
                    round_trip(flavor, &s)?;
                }
                Err(e) => prop_assert!(e.to_string().contains(&format!("{text:?}")), "{}", e),
            }
        }
    }
}

/// `len` saturates instead of overflowing on the largest intervals a server could report.
#[test]
fn len_of_the_largest_sets_saturates() {
    let whole = format!("{u}:1-{m},{v}:1-{m}", u = UUIDS[0], v = UUIDS[1], m = u64::MAX);
    assert_eq!(parse(Flavor::Mysql, &whole).len(), u64::MAX);
    let top = format!("{}:{m}", UUIDS[0], m = u64::MAX);
    assert_eq!(parse(Flavor::Mysql, &top).len(), 1);
    let maria = format!("0-1-{m},1-1-{m}", m = u64::MAX);
    assert_eq!(parse(Flavor::Mariadb, &maria).len(), u64::MAX);
}

/// Any set of either flavor, for the decisions' tests over garbage observations (a MySQL
/// set compared with a MariaDB position included).
pub(super) fn any_gtid_set() -> impl Strategy<Value = GtidSet> {
    prop_oneof![
        mysql_text().prop_map(|t| parse(Flavor::Mysql, &t)),
        maria_model().prop_map(|m| parse(Flavor::Mariadb, &maria_text(&m))),
    ]
}
