//! Operand versions: the one parser of `spec.version` and the checks every operator makes
//! of it (a supported release series, named in the error).
//!
//! Versions are compared by series first: what a server can be upgraded to, and which
//! releases an operator supports, are decided per `MAJOR.MINOR` series. An operator whose
//! system needs a patch release (etcd's image tags) requires it on top
//! ([`Version::require_patch`]).

use std::fmt;

use crate::{Error, Result};

/// A release, `MAJOR.MINOR[.PATCH]`. Ordered by major, minor, then patch (none before any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version, when given.
    pub patch: Option<u32>,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

impl Version {
    /// Parses `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`: one to four digits each, nothing else
    /// (no sign, no leading `v`, no suffix).
    pub fn parse(s: &str) -> Option<Version> {
        let parts: Vec<&str> = s.split('.').collect();
        if !(2..=3).contains(&parts.len()) {
            return None;
        }
        let num = |p: &str| {
            let digits = !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| p.parse::<u32>().ok()).flatten()
        };
        let patch = match parts.get(2) {
            Some(p) => Some(num(p)?),
            None => None,
        };
        Some(Version { major: num(parts[0])?, minor: num(parts[1])?, patch })
    }

    /// The release series, `MAJOR.MINOR`.
    pub fn series(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// The version, if it names a patch release.
    pub fn require_patch(self) -> Option<Version> {
        self.patch.is_some().then_some(self)
    }
}

/// Refuses `version` (of field `field`, for messages `what`: "etcd", "MariaDB") unless its
/// series is one of `supported`, naming them.
pub fn check_supported(field: &str, what: &str, version: &Version, supported: &[(u32, u32)]) -> Result<()> {
    if supported.contains(&version.series()) {
        return Ok(());
    }
    let list: Vec<String> = supported.iter().map(|(major, minor)| format!("{major}.{minor}")).collect();
    Err(Error::invalid_spec(field, format!("{what} {version} is not supported; supported: {}", list.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_two_or_three_numbers_and_nothing_else() {
        assert_eq!(Version::parse("10.11"), Some(Version { major: 10, minor: 11, patch: None }));
        assert_eq!(Version::parse("3.6.16"), Some(Version { major: 3, minor: 6, patch: Some(16) }));
        for bad in ["", "3", "3.6.1.2", "v3.6.1", "3.x", "3.6.", "+3.6", "3.6.1-rc1", "12345.1", " 3.6"] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn orders_by_series_then_patch_and_prints_what_it_parsed() {
        let v = |s| Version::parse(s).expect(s);
        assert!(v("10.6.20") < v("10.11"));
        assert!(v("10.11") < v("10.11.0"));
        assert!(v("3.5.9") < v("3.6.0"));
        assert_eq!(v("8.4").to_string(), "8.4");
        assert_eq!(v("3.6.16").to_string(), "3.6.16");
        assert_eq!(v("3.6").require_patch(), None);
        assert_eq!(v("3.6.1").require_patch(), Some(v("3.6.1")));
    }

    #[test]
    fn an_unsupported_series_is_refused_with_the_supported_ones() {
        let v = Version::parse("3.4.1").expect("version");
        assert!(check_supported("spec.version", "etcd", &Version::parse("3.6.1").expect("v"), &[(3, 6)]).is_ok());
        let e = check_supported("spec.version", "etcd", &v, &[(3, 5), (3, 6)]).expect_err("3.4 refused");
        assert_eq!(e.to_string(), "invalid spec: spec.version: etcd 3.4.1 is not supported; supported: 3.5, 3.6");
    }
}
