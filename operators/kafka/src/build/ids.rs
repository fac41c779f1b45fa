//! The ids a cluster's storage is formatted with, derived from the KafkaCluster's
//! `metadata.uid` so that every pod computes the same ones without talking to the others:
//!
//! - the cluster id: the uid's 16 bytes as Kafka writes a `Uuid` (URL-safe base64 without
//!   padding, 22 characters), unless `status.clusterId` already holds one (the caller keeps
//!   that);
//! - the directory id of each initial controller (KIP-853: a voter is its node id *and* the
//!   id of its metadata log directory, so that a controller whose disk was wiped cannot
//!   pass for the voter it was). Every controller of a new cluster formats its storage with
//!   the same `--initial-controllers` list, so each must know every other's directory id in
//!   advance: hence derived, not random.
//!
//! Kafka reserves the uuids whose first 8 bytes are zero and last 8 below 100
//! (`Uuid.RESERVED`: the zero uuid means "unassigned", 1 "lost", 2 "migrating"), and never
//! generates one whose text starts with `-` (it would read as an option on a command line).
//! `kafka-storage format` accepts both anyway (checked with the 4.4.0 jar), so the
//! directory ids are built to avoid them. A cluster id may start with `-`: the start
//! script passes it as `--cluster-id=<id>`, which Kafka's argument parser takes.

use statecraft_shared::{Error, Result};

/// Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, without padding.
fn kafka_uuid(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u32 = 0;
    let mut held = 0;
    let mut out = String::with_capacity(22);
    for byte in bytes {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 6 {
            held -= 6;
            out.push(char::from(ALPHABET[((bits >> held) & 0x3f) as usize]));
        }
    }
    if held > 0 {
        out.push(char::from(ALPHABET[((bits << (6 - held)) & 0x3f) as usize]));
    }
    out
}

/// The 16 bytes of a UUID in its text form (`8-4-4-4-12` hex digits), as Kubernetes gives
/// `metadata.uid`.
fn uuid_bytes(uid: &str) -> Option<[u8; 16]> {
    let text = uid.as_bytes();
    let dashes_ok = text.len() == 36 && [8, 13, 18, 23].iter().all(|&i| text[i] == b'-');
    if !dashes_ok {
        return None;
    }
    let hex: Vec<u8> = text.iter().copied().filter(|&c| c != b'-').collect();
    let mut bytes = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).ok()?;
        *bytes.get_mut(i)? = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(bytes)
}

/// The cluster id of a KafkaCluster whose `metadata.uid` is `uid`.
pub fn cluster_id(uid: &str) -> Result<String> {
    uuid_bytes(uid)
        .map(kafka_uuid)
        .ok_or_else(|| Error::Permanent(format!("metadata.uid {uid:?} is not a UUID: no cluster id can be derived")))
}

/// 128-bit FNV-1a: stable across builds and platforms, which is all this needs (the ids are
/// not secrets; they must only differ between nodes and clusters).
fn fnv1a_128(data: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    data.iter().fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

/// SplitMix64's finalizer: every output bit depends on every input bit.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The directory id initial controller `node` of the cluster with `uid` is formatted with:
/// FNV-1a of both, spread by two Feistel rounds (FNV barely mixes the last bytes, so ids of
/// neighbouring nodes would look alike; the rounds are a bijection, so distinct hashes stay
/// distinct). The first byte is then forced to `0b01xx_xxxx`: the text starts with a letter
/// between `Q` and `f` (never `-`), and the first 8 bytes are never zero (never reserved).
pub fn directory_id(uid: &str, node: i32) -> String {
    let hash = fnv1a_128(format!("statecraft-kafka directory {uid} {node}").as_bytes());
    let (mut high, mut low) = ((hash >> 64) as u64, hash as u64);
    low ^= mix64(high);
    high ^= mix64(low);
    let mut bytes = ((u128::from(high) << 64) | u128::from(low)).to_be_bytes();
    bytes[0] = (bytes[0] & 0x3f) | 0x40;
    kafka_uuid(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's `Uuid.fromString`: the 16 bytes back, if `text` is one.
    fn decode(text: &str) -> Option<[u8; 16]> {
        const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        if text.len() != 22 {
            return None;
        }
        let mut bits: u128 = 0;
        for c in text[..21].chars() {
            bits = (bits << 6) | ALPHABET.find(c)? as u128;
        }
        // 22 characters are 132 bits: the last character's low 4 are padding, zero.
        let last = ALPHABET.find(text.chars().last()?)? as u128;
        (last & 0xf == 0).then(|| ((bits << 2) | (last >> 4)).to_be_bytes())
    }

    #[test]
    fn the_cluster_id_is_the_uids_bytes_in_kafkas_form() {
        // Kafka: new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L).toString()
        assert_eq!(cluster_id("01234567-89ab-cdef-fedc-ba9876543210").unwrap(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(cluster_id("00000000-0000-0000-0000-000000000000").unwrap(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(cluster_id("ffffffff-ffff-ffff-ffff-ffffffffffff").unwrap(), "_____________________w");
        let uid = "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b";
        assert_eq!(decode(&cluster_id(uid).unwrap()).unwrap(), uuid_bytes(uid).unwrap());
        for bad in ["", "not-a-uuid", "5f1c2a3b0d4e4f608a7b9c0d1e2f3a4b", "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4g"] {
            assert!(matches!(cluster_id(bad), Err(Error::Permanent(_))), "{bad:?}");
        }
    }

    #[test]
    fn directory_ids_are_stable_distinct_and_never_reserved() {
        let uids = ["5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b", "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4c"];
        let mut seen = std::collections::BTreeSet::new();
        for uid in uids {
            for node in 0..5 {
                let id = directory_id(uid, node);
                assert_eq!(id, directory_id(uid, node), "stable");
                let bytes = decode(&id).unwrap_or_else(|| panic!("{id} is not a Kafka Uuid"));
                assert!(!id.starts_with('-') && !id.starts_with('_'), "{id}");
                assert_ne!(bytes[..8], [0u8; 8], "{id}: reserved");
                assert_ne!(kafka_uuid(bytes), cluster_id(uid).unwrap());
                assert!(seen.insert(id), "ids repeat");
            }
            let (a, b) = (directory_id(uid, 0), directory_id(uid, 1));
            let same = a.chars().zip(b.chars()).filter(|(x, y)| x == y).count();
            assert!(same < 8, "neighbours look alike: {a} {b}");
        }
    }
}
