//! Which names a cluster resource may have. An operator names the objects it builds after
//! the cluster: the StatefulSet and its pods `<name>-<ordinal>`, Services `<name><suffix>`.
//! The API server accepts any DNS subdomain (253 characters, dots allowed) as the name of a
//! custom resource, but a Service name must be a DNS-1035 label and a StatefulSet longer
//! than [`MAX_STATEFULSET_NAME`] never gets its pods. Without a check here such a cluster
//! would sit with an empty status while the StatefulSet controller or the API server
//! refuses the objects, so the name is checked twice: by a CEL rule in the CRD
//! ([`with_name_rule`]), refusing the object at once, and by the operator
//! ([`check_cluster_name`]), for objects created before the rule (and restore targets).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, ValidationRule};

use crate::{Error, Result};

/// Longest DNS-1035 label (a Service name) and longest label value.
pub const MAX_LABEL: usize = 63;

/// Longest StatefulSet name that gets pods. The API server accepts longer ones, but the
/// StatefulSet controller labels every pod `controller-revision-hash: <name>-<hash>`, with a
/// hash of up to 10 characters, and a label value has at most [`MAX_LABEL`] characters.
pub const MAX_STATEFULSET_NAME: usize = MAX_LABEL - 11;

/// A DNS-1035 label: what a Service name must be (lower-case letters, digits and `-`,
/// starting with a letter, ending with a letter or digit). Anchored, for the CRD schema and
/// CEL `matches()`.
pub const DNS_1035_LABEL: &str = "^[a-z]([-a-z0-9]*[a-z0-9])?$";

/// The longest name of a cluster whose StatefulSet has the cluster's name and whose
/// Services are named `<name><suffix>` for each of `service_suffixes`. A const fn, so that
/// an operator declares its limit as a constant derived from the names it builds.
pub const fn max_cluster_name(service_suffixes: &[&str]) -> usize {
    let mut max = MAX_STATEFULSET_NAME;
    let mut i = 0;
    while i < service_suffixes.len() {
        let room = MAX_LABEL - service_suffixes[i].len();
        if room < max {
            max = room;
        }
        i += 1;
    }
    max
}

/// Whether `name` is a DNS-1035 label of at most [`MAX_LABEL`] characters (see
/// [`DNS_1035_LABEL`]).
pub fn is_dns_1035_label(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    b.len() <= MAX_LABEL
        && b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter().all(inner)
}

/// Whether `name` is a DNS-1123 label (what a namespace name must be): like a DNS-1035
/// label, but it may start with a digit.
pub fn is_dns_1123_label(name: &str) -> bool {
    let b = name.as_bytes();
    let alphanumeric = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.len() <= MAX_LABEL
        && b.first().is_some_and(alphanumeric)
        && b.last().is_some_and(alphanumeric)
        && b.iter().all(|c| alphanumeric(c) || *c == b'-')
}

/// What a valid cluster name is, for messages (the CEL rule's and [`check_cluster_name`]'s).
fn rule_text(max: usize) -> String {
    format!(
        "must be at most {max} characters of lower-case letters, digits and '-', starting with a letter and \
         ending with a letter or digit: it names the cluster's StatefulSet, pods and Services"
    )
}

/// Checks a cluster's name (`field`: `metadata.name`, or the field of a restore that names
/// the cluster to create) against the limit `max` of [`max_cluster_name`].
pub fn check_cluster_name(field: &str, name: &str, max: usize) -> Result<()> {
    if name.len() > max || !is_dns_1035_label(name) {
        let problem =
            if name.len() > max { format!("{} characters", name.len()) } else { "not a DNS-1035 label".into() };
        return Err(Error::invalid_spec(field, format!("{name:?} is {problem}; the name {}", rule_text(max))));
    }
    Ok(())
}

/// `crd` with a CEL rule at the root of each version's schema that refuses a new object
/// whose `metadata.name` does not pass [`check_cluster_name`] with `max`. The rule runs on
/// create only (`optionalOldSelf`, and names never change): an object created before the
/// rule keeps getting its status written, and the operator reports its name instead. The
/// rule has no `fieldPath`: the API server accepts only paths its schema declares, and it
/// declares no `metadata` fields, so the message itself names `metadata.name`.
pub fn with_name_rule(mut crd: CustomResourceDefinition, max: usize) -> CustomResourceDefinition {
    let rule = ValidationRule {
        rule: format!(
            "oldSelf.hasValue() || (self.metadata.name.size() <= {max} && self.metadata.name.matches('{DNS_1035_LABEL}'))"
        ),
        message: Some(format!("metadata.name {}", rule_text(max))),
        reason: Some("FieldValueInvalid".into()),
        optional_old_self: Some(true),
        ..Default::default()
    };
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.x_kubernetes_validations.get_or_insert_with(Vec::new).push(rule.clone());
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_leaves_room_for_the_longest_service_suffix_and_the_revision_hash() {
        assert_eq!(max_cluster_name(&[]), 52);
        assert_eq!(max_cluster_name(&["-hl", "-primary", "-replicas"]), 52);
        assert_eq!(max_cluster_name(&["-a-very-long-service-suffix"]), 63 - 27);
    }

    #[test]
    fn dns_1035_labels() {
        for ok in ["a", "db", "db-1", "a1b2", &"a".repeat(63)] {
            assert!(is_dns_1035_label(ok), "{ok}");
        }
        for bad in ["", "1db", "-db", "db-", "my.db", "DB", "db_1", "dé", &"a".repeat(64)] {
            assert!(!is_dns_1035_label(bad), "{bad}");
        }
    }

    #[test]
    fn cluster_names_are_checked_against_the_limit_and_the_label_rules() {
        assert!(check_cluster_name("metadata.name", &"a".repeat(52), 52).is_ok());
        for (name, says) in
            [("a".repeat(53), "53 characters"), ("my.db".into(), "DNS-1035"), ("1db".into(), "DNS-1035")]
        {
            match check_cluster_name("metadata.name", &name, 52) {
                Err(Error::InvalidSpec { field, message }) => {
                    assert_eq!(field, "metadata.name");
                    assert!(message.contains(says) && message.contains("at most 52"), "{message}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_rule_is_added_to_every_version_at_the_root() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
            CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
        };
        let version = |name: &str| CustomResourceDefinitionVersion {
            name: name.into(),
            schema: Some(CustomResourceValidation { open_api_v3_schema: Some(JSONSchemaProps::default()) }),
            ..Default::default()
        };
        let crd = CustomResourceDefinition {
            spec: CustomResourceDefinitionSpec { versions: vec![version("v1"), version("v2")], ..Default::default() },
            ..Default::default()
        };
        let crd = with_name_rule(crd, 40);
        for v in &crd.spec.versions {
            let rules = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| s.x_kubernetes_validations.clone());
            let rules = rules.expect("a rule");
            assert_eq!(rules.len(), 1);
            assert!(rules[0].rule.contains("size() <= 40") && rules[0].rule.contains(DNS_1035_LABEL));
            assert!(rules[0].message.as_deref().is_some_and(|m| m.starts_with("metadata.name must be at most 40")));
        }
    }
}
