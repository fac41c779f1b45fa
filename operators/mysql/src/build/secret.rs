//! The Secret with the generated passwords. The controller creates it once, when absent,
//! and never regenerates it (the servers hold the passwords). Passwords are never printed:
//! [`Passwords`] redacts its `Debug`, and nothing here logs.

use std::fmt;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use rand::Rng;

use super::Names;

/// Length of every generated password.
pub const PASSWORD_LENGTH: usize = 32;
/// Characters of generated passwords: letters and digits, so that they need no quoting in
/// SQL, my.cnf or shell (32 of 62 symbols: about 190 bits).
pub const PASSWORD_CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Secret key of the administrator (`root`) password.
pub const ROOT_KEY: &str = "root-password";
/// Secret key of the operator's own account.
pub const OPERATOR_KEY: &str = "operator-password";
/// Secret key of the replication account.
pub const REPLICATION_KEY: &str = "replication-password";
/// Secret key of the backup account.
pub const BACKUP_KEY: &str = "backup-password";
/// Secret key of the metrics exporter's account.
pub const EXPORTER_KEY: &str = "exporter-password";

/// The accounts' passwords. `Debug` shows only the key names.
#[derive(Clone, PartialEq, Eq)]
pub struct Passwords {
    /// `root`.
    pub root: String,
    /// The operator's account.
    pub operator: String,
    /// The replication account.
    pub replication: String,
    /// The backup account.
    pub backup: String,
    /// The metrics exporter's account. `None` when the Secret was written by an operator
    /// older than the exporter: no server holds it yet, so the controller may add it
    /// ([`Passwords::complete`]).
    pub exporter: Option<String>,
}

impl fmt::Debug for Passwords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Passwords")
            .field("root", &"<redacted>")
            .field("operator", &"<redacted>")
            .field("replication", &"<redacted>")
            .field("backup", &"<redacted>")
            .field("exporter", &self.exporter.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One password of [`PASSWORD_LENGTH`] characters from [`PASSWORD_CHARSET`], drawn
/// uniformly from `rng`.
pub fn generate_password(rng: &mut impl Rng) -> String {
    (0..PASSWORD_LENGTH).map(|_| PASSWORD_CHARSET[rng.random_range(0..PASSWORD_CHARSET.len())] as char).collect()
}

impl Passwords {
    /// New passwords from `rng`: the operator passes a cryptographically secure generator
    /// (`rand::rng()`), tests a seeded one.
    pub fn generate(rng: &mut impl Rng) -> Self {
        Passwords {
            root: generate_password(rng),
            operator: generate_password(rng),
            replication: generate_password(rng),
            backup: generate_password(rng),
            exporter: Some(generate_password(rng)),
        }
    }

    /// Generates the passwords of accounts added since the Secret was written (today the
    /// exporter's), leaving those the servers hold alone.
    pub fn complete(mut self, rng: &mut impl Rng) -> Self {
        self.exporter.get_or_insert_with(|| generate_password(rng));
        self
    }

    /// Reads the passwords back from the cluster's Secret; `None` when a key every server
    /// holds is missing or not UTF-8.
    pub fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let get = |k: &str| data.get(k).and_then(|v| String::from_utf8(v.0.clone()).ok());
        Some(Passwords {
            root: get(ROOT_KEY)?,
            operator: get(OPERATOR_KEY)?,
            replication: get(REPLICATION_KEY)?,
            backup: get(BACKUP_KEY)?,
            exporter: get(EXPORTER_KEY),
        })
    }
}

/// The Secret holding `passwords`.
pub fn secret(names: &Names, passwords: &Passwords) -> Secret {
    let data = [
        (ROOT_KEY, Some(&passwords.root)),
        (OPERATOR_KEY, Some(&passwords.operator)),
        (REPLICATION_KEY, Some(&passwords.replication)),
        (BACKUP_KEY, Some(&passwords.backup)),
        (EXPORTER_KEY, passwords.exporter.as_ref()),
    ]
    .into_iter()
    .filter_map(|(key, password)| Some((key.to_string(), ByteString(password?.as_bytes().to_vec()))))
    .collect();
    Secret {
        metadata: names.set().meta(names.secret()),
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn passwords_have_the_length_and_charset() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let p = generate_password(&mut rng);
            assert_eq!(p.len(), PASSWORD_LENGTH);
            assert!(p.bytes().all(|b| PASSWORD_CHARSET.contains(&b)), "{p}");
        }
    }

    #[test]
    fn passwords_are_distinct_and_deterministic_for_a_seed() {
        let a = Passwords::generate(&mut StdRng::seed_from_u64(1));
        let b = Passwords::generate(&mut StdRng::seed_from_u64(1));
        let c = Passwords::generate(&mut StdRng::seed_from_u64(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let exporter = a.exporter.clone().unwrap();
        let all = [&a.root, &a.operator, &a.replication, &a.backup, &exporter];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x, y);
            }
        }
    }

    #[test]
    fn every_character_is_used() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            seen.extend(generate_password(&mut rng).bytes());
        }
        assert_eq!(seen.len(), PASSWORD_CHARSET.len());
    }

    #[test]
    fn debug_redacts_passwords() {
        let p = Passwords::generate(&mut StdRng::seed_from_u64(1));
        let shown = format!("{p:?} {p:#?}");
        for secret in [&p.root, &p.operator, &p.replication, &p.backup, p.exporter.as_ref().unwrap()] {
            assert!(!shown.contains(secret.as_str()), "{shown}");
        }
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn secret_round_trips() {
        let p = Passwords::generate(&mut StdRng::seed_from_u64(1));
        let s = secret(&Names::new("db", "ns"), &p);
        assert_eq!(s.metadata.name.as_deref(), Some("db-passwords"));
        let keys: Vec<_> = s.data.as_ref().unwrap().keys().cloned().collect();
        assert_eq!(keys, [BACKUP_KEY, EXPORTER_KEY, OPERATOR_KEY, REPLICATION_KEY, ROOT_KEY]);
        assert_eq!(Passwords::from_secret(&s), Some(p));
        assert_eq!(Passwords::from_secret(&Secret::default()), None);
    }

    /// A Secret written before the exporter existed is read, and only the exporter's
    /// password is added: the others are what the servers hold.
    #[test]
    fn an_older_secret_gains_the_exporter_password_and_keeps_the_rest() {
        let p = Passwords::generate(&mut StdRng::seed_from_u64(1));
        let mut older = secret(&Names::new("db", "ns"), &p);
        older.data.as_mut().unwrap().remove(EXPORTER_KEY);
        let read = Passwords::from_secret(&older).unwrap();
        assert_eq!(read.exporter, None);
        let completed = read.clone().complete(&mut StdRng::seed_from_u64(9));
        assert_eq!((&completed.root, &completed.operator, &completed.backup), (&p.root, &p.operator, &p.backup));
        assert_eq!(completed.replication, p.replication);
        let added = completed.exporter.clone().unwrap();
        assert_eq!(added.len(), PASSWORD_LENGTH);
        // Completing again keeps it.
        assert_eq!(completed.clone().complete(&mut StdRng::seed_from_u64(10)).exporter, Some(added));
        assert_eq!(format!("{read:?}").matches("<redacted>").count(), 4);
    }
}
