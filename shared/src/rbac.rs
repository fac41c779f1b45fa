//! Namespace-scoped, least-privilege RBAC rendered from the rules each operator declares.
//!
//! A Statecraft operator runs in one namespace and manages objects in the namespaces it
//! watches (its own by default), so it never needs a ClusterRole. Each operator declares the
//! `(apiGroup, resources, verbs)` it uses as [`Rule`]s (usually `base_rules()` plus a
//! `const` slice of its own); [`render`] turns them into a ServiceAccount, a Role and
//! RoleBinding in each watched namespace, and in its own namespace a Role and RoleBinding
//! named `<name>-self` with [`self_rules`] (its Lease, its pod); [`to_yaml`] prints them for
//! `kubectl apply` or for a golden file.
//!
//! [`validate`] refuses, before anything is rendered, every rule that is not least
//! privilege or that could not work in a namespaced Role:
//!
//! - wildcards (`*`) in the group, the resources or the verbs: they silently grow with every
//!   new API the cluster learns, so the grant can never be reviewed;
//! - cluster-scoped resources (see [`CLUSTER_SCOPED`]): a Role cannot grant them, so such a
//!   rule is either a mistake or a sign the operator wants cluster-wide powers;
//! - the verbs `escalate`, `bind` and `impersonate`, which let their holder grant itself
//!   more than it was given;
//! - writing `roles` or `rolebindings`: an operator that can edit its own Role has every
//!   permission in the namespace;
//! - empty or unknown verbs and resources, which grant nothing and hide a typo;
//! - `resourceNames` together with `create` or `deletecollection`, which Kubernetes cannot
//!   restrict by name, so such a rule grants less than it says and fails at run time.
//!
//! Rendering is deterministic: rules are merged (same group and verbs: one rule listing all
//! resources; same group and resource: one rule with the union of verbs) and sorted, so the
//! output does not depend on the order or the split in which rules were declared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The core API group (`v1`: pods, services, secrets, ...) is spelled as the empty string.
pub const CORE_GROUP: &str = "";

/// The API group of Role, RoleBinding and friends.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// One permission an operator needs: `verbs` on `resources` of `api_group`, optionally only
/// on the objects named in `resource_names`.
///
/// All fields are `'static` so that operators can declare their rules as a `const` slice
/// next to the code that uses them:
///
/// ```
/// use statecraft_shared::rbac::{Rule, CORE_GROUP};
///
/// const RULES: &[Rule] = &[
///     Rule::new("apps", &["statefulsets"], &["get", "list", "watch", "create", "patch"]),
///     Rule::new(CORE_GROUP, &["secrets"], &["get"]).with_resource_names(&["mysql-root"]),
/// ];
/// # assert!(statecraft_shared::rbac::validate(RULES).is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The API group without version: `""` for core, `"apps"`, `"coordination.k8s.io"`.
    pub api_group: &'static str,
    /// Plural lowercase resource names, optionally with a subresource (`"pods/exec"`).
    pub resources: &'static [&'static str],
    /// Kubernetes verbs: get, list, watch, create, update, patch, delete, deletecollection.
    pub verbs: &'static [&'static str],
    /// When set, the rule applies only to objects with these names. `None` means every
    /// object of the resources; `Some(&[])` is rejected because it would read as "none"
    /// but Kubernetes treats an empty list as "all".
    pub resource_names: Option<&'static [&'static str]>,
}

impl Rule {
    /// A rule for all objects of `resources` in `api_group`.
    pub const fn new(
        api_group: &'static str,
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Self {
        Rule { api_group, resources, verbs, resource_names: None }
    }

    /// Restricts the rule to the named objects.
    pub const fn with_resource_names(self, names: &'static [&'static str]) -> Self {
        Rule { resource_names: Some(names), ..self }
    }
}

/// Shows the rule the way a reviewer reads a Role, so that error messages name it.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{apiGroup: {:?}, resources: [{}], verbs: [{}]",
            self.api_group,
            self.resources.join(", "),
            self.verbs.join(", ")
        )?;
        if let Some(names) = self.resource_names {
            write!(f, ", resourceNames: [{}]", names.join(", "))?;
        }
        f.write_str("}")
    }
}

/// The RBAC of one operator: its identity and every rule it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRbac {
    /// Name of the ServiceAccount, Roles and RoleBindings, and the `app.kubernetes.io/name`
    /// label, e.g. `statecraft-mysql`. Must be a DNS-1123 label because it is a label value.
    pub name: String,
    /// The namespace the operator runs in: its ServiceAccount, Lease and pod live there.
    pub namespace: String,
    /// The namespaces whose resources it manages: `rules` are granted in each.
    pub watched: Vec<String>,
    /// The rules in every watched namespace, taken verbatim; see
    /// [`OperatorRbac::with_base_rules`].
    pub rules: Vec<Rule>,
}

impl OperatorRbac {
    /// RBAC with exactly `rules`, for an operator watching its own namespace.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>, rules: impl IntoIterator<Item = Rule>) -> Self {
        let namespace = namespace.into();
        OperatorRbac {
            name: name.into(),
            watched: vec![namespace.clone()],
            namespace,
            rules: rules.into_iter().collect(),
        }
    }

    /// RBAC with [`base_rules`] followed by the operator's own rules: the usual way to
    /// build it, so that no operator forgets what the shared library needs.
    pub fn with_base_rules(
        name: impl Into<String>,
        namespace: impl Into<String>,
        operator_rules: impl IntoIterator<Item = Rule>,
    ) -> Self {
        Self::new(name, namespace, base_rules().into_iter().chain(operator_rules))
    }

    /// The same RBAC granting its rules in `watched` instead.
    pub fn watching(mut self, watched: &[String]) -> Self {
        self.watched = watched.to_vec();
        self
    }
}

/// The rules every Statecraft operator needs in each watched namespace for the shared
/// library itself, and nothing else; operators append their own.
///
/// - `events.k8s.io` `events` create/patch: kube's `Recorder` (kube-runtime 5) publishes
///   `events.k8s.io/v1` Events, creating a new one and patching it when the same event
///   repeats. It never writes core `v1` Events, so no rule for the core group is needed.
/// - `events.k8s.io` `events` list: a StatefulSet that cannot create a member's pod (a
///   PriorityClass that does not exist, a quota) says why only in its `FailedCreate`
///   Events, which the operators read into the cluster's conditions
///   ([`crate::pods::creation_problems`]).
pub fn base_rules() -> Vec<Rule> {
    vec![Rule::new("events.k8s.io", &["events"], &["list", "create", "patch"])]
}

/// The rules an operator needs in its own namespace, on itself: the `<name>-self` Role.
///
/// - `coordination.k8s.io` `leases` get/watch/create/update: leader election reads the
///   Lease, creates it the first time and renews or takes it over with an update; a standby
///   watches it, so that it sees each renewal as it is written. No `resourceNames`, because
///   `create` cannot be restricted by name.
/// - `pods` get: its own pod, read once for the image its Jobs run
///   (`deploy::operator_image`).
pub fn self_rules() -> Vec<Rule> {
    vec![
        Rule::new("coordination.k8s.io", &["leases"], &["get", "watch", "create", "update"]),
        Rule::new(CORE_GROUP, &["pods"], &["get"]),
    ]
}

/// The suffix of the Role and RoleBinding holding [`self_rules`].
pub const SELF_SUFFIX: &str = "-self";

/// Resources that exist outside any namespace, keyed by `(apiGroup, resource)`. A Role
/// cannot grant them, so a rule naming one is refused: either it is a mistake or the
/// operator wants cluster-wide powers, which Statecraft operators never get.
///
/// Taken from the `ClusterResourceScope` types of k8s-openapi 0.29 (`v1_33`, including
/// alpha and beta groups); the unit tests check the list against those types. Cluster-scoped
/// custom resources cannot be known here and are not detected.
pub const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "componentstatuses"),
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumes"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apiregistration.k8s.io", "apiservices"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("certificates.k8s.io", "certificatesigningrequests"),
    ("certificates.k8s.io", "clustertrustbundles"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
    ("internal.apiserver.k8s.io", "storageversions"),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "ipaddresses"),
    ("networking.k8s.io", "servicecidrs"),
    ("node.k8s.io", "runtimeclasses"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceslices"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("storage.k8s.io", "volumeattributesclasses"),
    ("storagemigration.k8s.io", "storageversionmigrations"),
];

/// The verbs a Statecraft operator may be granted, in the order they are rendered
/// (reads before writes, as people write them). Deriving `Ord` gives that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    fn parse(verb: &str) -> Option<Verb> {
        Some(match verb {
            "get" => Verb::Get,
            "list" => Verb::List,
            "watch" => Verb::Watch,
            "create" => Verb::Create,
            "update" => Verb::Update,
            "patch" => Verb::Patch,
            "delete" => Verb::Delete,
            "deletecollection" => Verb::DeleteCollection,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }

    /// Kubernetes cannot check `resourceNames` for these: the name of an object being
    /// created is not known at authorization time, and deletecollection names no object.
    fn restrictable_by_name(self) -> bool {
        !matches!(self, Verb::Create | Verb::DeleteCollection)
    }
}

/// Verbs that let their holder give itself more than it was granted.
const ESCALATION_VERBS: &[&str] = &["escalate", "bind", "impersonate"];

/// Why a rule was refused. The enclosing [`RbacError::Rule`] names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    #[error("wildcard API group {0:?}: name the group")]
    WildcardGroup(String),
    #[error("invalid API group {group:?}: {reason}")]
    InvalidGroup { group: String, reason: &'static str },
    #[error("wildcard resource {0:?}: list the resources")]
    WildcardResource(String),
    #[error("invalid resource {0:?}: expected a lowercase plural like \"pods\" or \"pods/exec\"")]
    InvalidResource(String),
    #[error("no resources: the rule grants nothing")]
    EmptyResources,
    #[error("resource {resource:?} of group {group:?} is cluster-scoped; a namespaced Role cannot grant it")]
    ClusterScoped { group: String, resource: String },
    #[error("wildcard verb \"*\": list the verbs")]
    WildcardVerb,
    #[error("verb {0:?} allows privilege escalation")]
    EscalationVerb(String),
    #[error("unknown verb {0:?}: expected one of get, list, watch, create, update, patch, delete, deletecollection")]
    UnknownVerb(String),
    #[error("no verbs: the rule grants nothing")]
    EmptyVerbs,
    #[error("verb {verb:?} on {resource:?} would let the operator rewrite its own permissions")]
    RbacWrite { resource: String, verb: String },
    #[error("resourceNames is empty, which Kubernetes reads as every object: use Rule::new for that")]
    EmptyResourceNames,
    #[error("invalid resource name {0:?}")]
    InvalidResourceName(String),
    #[error("verb {0:?} cannot be restricted by resourceNames: put it in a rule without names")]
    NotRestrictableByName(String),
}

/// Why RBAC could not be validated or rendered.
///
/// Rules are compiled into the operator, so this is a bug in the operator rather than in
/// anything a user wrote; it converts into [`crate::Error::Permanent`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RbacError {
    /// A rule is not least-privilege or cannot work in a namespaced Role.
    #[error("RBAC rules[{index}] {rule}: {violation}")]
    Rule { index: usize, rule: String, violation: Violation },
    /// The operator name or namespace cannot name Kubernetes objects.
    #[error("RBAC {field} {value:?}: {reason}")]
    InvalidName { field: &'static str, value: String, reason: &'static str },
}

impl RbacError {
    /// The violation, when a rule was refused; lets callers and tests match on the kind.
    pub fn violation(&self) -> Option<&Violation> {
        match self {
            RbacError::Rule { violation, .. } => Some(violation),
            RbacError::InvalidName { .. } => None,
        }
    }
}

impl From<RbacError> for crate::Error {
    fn from(e: RbacError) -> Self {
        crate::Error::Permanent(e.to_string())
    }
}

/// Checks that every rule is least-privilege and can be granted by a namespaced Role; see
/// the module documentation for what is refused. Stops at the first offending rule and
/// names it (index and content). Duplicate or overlapping rules are accepted: [`render`]
/// merges them.
pub fn validate(rules: &[Rule]) -> Result<(), RbacError> {
    for (index, rule) in rules.iter().enumerate() {
        check_rule(rule).map_err(|violation| RbacError::Rule { index, rule: rule.to_string(), violation })?;
    }
    Ok(())
}

fn check_rule(rule: &Rule) -> Result<(), Violation> {
    check_group(rule.api_group)?;
    if rule.resources.is_empty() {
        return Err(Violation::EmptyResources);
    }
    if rule.verbs.is_empty() {
        return Err(Violation::EmptyVerbs);
    }
    for &resource in rule.resources {
        check_resource(rule.api_group, resource)?;
    }
    let mut verbs = Vec::with_capacity(rule.verbs.len());
    for &verb in rule.verbs {
        verbs.push(check_verb(verb)?);
    }
    if rule.api_group == RBAC_GROUP {
        for &resource in rule.resources {
            if matches!(base_resource(resource), "roles" | "rolebindings")
                && let Some(write) = verbs.iter().find(|v| v.is_write())
            {
                return Err(Violation::RbacWrite { resource: resource.to_owned(), verb: write.as_str().to_owned() });
            }
        }
    }
    if let Some(names) = rule.resource_names {
        if names.is_empty() {
            return Err(Violation::EmptyResourceNames);
        }
        if let Some(name) = names.iter().find(|n| n.is_empty() || n.contains('*')) {
            return Err(Violation::InvalidResourceName((*name).to_owned()));
        }
        if let Some(verb) = verbs.iter().find(|v| !v.restrictable_by_name()) {
            return Err(Violation::NotRestrictableByName(verb.as_str().to_owned()));
        }
    }
    Ok(())
}

fn check_group(group: &str) -> Result<(), Violation> {
    let invalid = |reason| Err(Violation::InvalidGroup { group: group.to_owned(), reason });
    if group.contains('*') {
        return Err(Violation::WildcardGroup(group.to_owned()));
    }
    if group.contains('/') {
        return invalid("give the group without its version (\"apps\", not \"apps/v1\")");
    }
    if group == "core" || group == "v1" {
        return invalid("the core group is spelled \"\"");
    }
    if !group.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') {
        return invalid("expected a lowercase DNS name");
    }
    Ok(())
}

fn check_resource(group: &str, resource: &str) -> Result<(), Violation> {
    if resource.contains('*') {
        return Err(Violation::WildcardResource(resource.to_owned()));
    }
    let well_formed = |part: &str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    let mut parts = resource.split('/');
    let ok = parts.next().is_some_and(well_formed) && parts.next().is_none_or(well_formed) && parts.next().is_none();
    if !ok {
        return Err(Violation::InvalidResource(resource.to_owned()));
    }
    let base = base_resource(resource);
    if CLUSTER_SCOPED.iter().any(|&(g, r)| g == group && r == base) {
        return Err(Violation::ClusterScoped { group: group.to_owned(), resource: resource.to_owned() });
    }
    Ok(())
}

fn check_verb(verb: &str) -> Result<Verb, Violation> {
    if verb == "*" {
        return Err(Violation::WildcardVerb);
    }
    if ESCALATION_VERBS.contains(&verb) {
        return Err(Violation::EscalationVerb(verb.to_owned()));
    }
    Verb::parse(verb).ok_or_else(|| Violation::UnknownVerb(verb.to_owned()))
}

/// `pods/exec` -> `pods`: scope and RBAC checks are about the parent resource.
fn base_resource(resource: &str) -> &str {
    resource.split_once('/').map_or(resource, |(base, _)| base)
}

/// The objects that give an operator its permissions.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedRbac {
    /// The identity the operator's pods run as, in its namespace.
    pub service_account: ServiceAccount,
    /// Each Role (merged, sorted rules) with the RoleBinding that gives it to
    /// `service_account`: first `<name>-self` in the operator's namespace, then `<name>` in
    /// each watched namespace.
    pub roles: Vec<(Role, RoleBinding)>,
}

/// Validates the rules and names and renders the ServiceAccount, in `rbac.namespace`, and the
/// Roles and RoleBindings (see [`RenderedRbac::roles`]). The rules are merged and sorted (see
/// the module documentation) so that the output is stable for golden files and diffs; a
/// namespace watched twice is rendered once.
///
/// No Namespace is rendered: they belong to whoever installs the operator.
pub fn render(rbac: &OperatorRbac) -> Result<RenderedRbac, RbacError> {
    check_dns_label("name", &rbac.name)?;
    check_dns_label("namespace", &rbac.namespace)?;
    if rbac.watched.is_empty() {
        return Err(RbacError::InvalidName {
            field: "watched namespaces",
            value: String::new(),
            reason: "name at least one",
        });
    }
    for namespace in &rbac.watched {
        check_dns_label("watched namespace", namespace)?;
    }
    validate(&rbac.rules)?;

    let metadata = |name: &str, namespace: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(
            [
                ("app.kubernetes.io/managed-by", "statecraft"),
                ("app.kubernetes.io/name", rbac.name.as_str()),
                ("app.kubernetes.io/part-of", "statecraft"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ),
        ..ObjectMeta::default()
    };
    let bound = |name: &str, namespace: &str, rules: &[Rule]| {
        let role = Role { metadata: metadata(name, namespace), rules: Some(normalize(rules)) };
        let binding = RoleBinding {
            metadata: metadata(name, namespace),
            role_ref: RoleRef { api_group: RBAC_GROUP.to_owned(), kind: "Role".to_owned(), name: name.to_owned() },
            subjects: Some(vec![Subject {
                api_group: None,
                kind: "ServiceAccount".to_owned(),
                name: rbac.name.clone(),
                namespace: Some(rbac.namespace.clone()),
            }]),
        };
        (role, binding)
    };

    let mut roles = vec![bound(&format!("{}{SELF_SUFFIX}", rbac.name), &rbac.namespace, &self_rules())];
    let mut seen = BTreeSet::new();
    for namespace in rbac.watched.iter().filter(|ns| seen.insert(ns.as_str())) {
        roles.push(bound(&rbac.name, namespace, &rbac.rules));
    }
    Ok(RenderedRbac {
        service_account: ServiceAccount {
            metadata: metadata(&rbac.name, &rbac.namespace),
            ..ServiceAccount::default()
        },
        roles,
    })
}

/// Both the name (also a label value) and the namespace must be DNS-1123 labels.
fn check_dns_label(field: &'static str, value: &str) -> Result<(), RbacError> {
    if crate::names::is_dns_1123_label(value) {
        return Ok(());
    }
    Err(RbacError::InvalidName {
        field,
        value: value.to_owned(),
        reason: "must be 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
    })
}

/// Turns validated rules into the smallest stable set of PolicyRules granting exactly the
/// same permissions:
///
/// 1. union the verbs per (group, resource) for rules without names, and per
///    (group, resource, name) for rules with names, dropping named verbs already granted
///    on every object;
/// 2. regroup names that get the same verbs on the same resource;
/// 3. regroup resources that get the same verbs (on the same names) in the same group;
/// 4. sort by group, resources, names, verbs.
fn normalize(rules: &[Rule]) -> Vec<PolicyRule> {
    type Verbs = BTreeSet<Verb>;
    let verbs_of = |rule: &Rule| rule.verbs.iter().filter_map(|v| Verb::parse(v)).collect::<Verbs>();

    let mut unrestricted: BTreeMap<(&str, &str), Verbs> = BTreeMap::new();
    let mut named: BTreeMap<(&str, &str, &str), Verbs> = BTreeMap::new();
    for rule in rules {
        let verbs = verbs_of(rule);
        for &resource in rule.resources {
            match rule.resource_names {
                None => unrestricted.entry((rule.api_group, resource)).or_default().extend(&verbs),
                Some(names) => {
                    for &name in names {
                        named.entry((rule.api_group, resource, name)).or_default().extend(&verbs);
                    }
                }
            }
        }
    }

    let mut names_by_verbs: BTreeMap<(&str, &str, Vec<Verb>), BTreeSet<&str>> = BTreeMap::new();
    for ((group, resource, name), verbs) in named {
        let already = unrestricted.get(&(group, resource));
        let extra: Vec<Verb> = verbs.into_iter().filter(|v| already.is_none_or(|a| !a.contains(v))).collect();
        if !extra.is_empty() {
            names_by_verbs.entry((group, resource, extra)).or_default().insert(name);
        }
    }

    type Shape<'a> = (&'a str, Option<Vec<&'a str>>, Vec<Verb>);
    let mut resources_by_shape: BTreeMap<Shape, BTreeSet<&str>> = BTreeMap::new();
    for ((group, resource), verbs) in unrestricted {
        resources_by_shape.entry((group, None, verbs.into_iter().collect())).or_default().insert(resource);
    }
    for ((group, resource, verbs), names) in names_by_verbs {
        resources_by_shape.entry((group, Some(names.into_iter().collect()), verbs)).or_default().insert(resource);
    }

    let mut merged: Vec<MergedRule> = resources_by_shape
        .into_iter()
        .map(|((group, names, verbs), resources)| MergedRule {
            group,
            resources: resources.into_iter().collect(),
            names,
            verbs,
        })
        .collect();
    merged.sort();
    merged.into_iter().map(MergedRule::into_policy_rule).collect()
}

/// One rendered rule before it becomes a [`PolicyRule`]; the field order is the sort order
/// of the Role's rules (group, then resources, names, verbs).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct MergedRule<'a> {
    group: &'a str,
    resources: Vec<&'a str>,
    names: Option<Vec<&'a str>>,
    verbs: Vec<Verb>,
}

impl MergedRule<'_> {
    fn into_policy_rule(self) -> PolicyRule {
        let strings = |items: Vec<&str>| items.into_iter().map(str::to_owned).collect::<Vec<_>>();
        PolicyRule {
            api_groups: Some(vec![self.group.to_owned()]),
            resources: Some(strings(self.resources)),
            resource_names: self.names.map(strings),
            verbs: self.verbs.into_iter().map(|v| v.as_str().to_owned()).collect(),
            non_resource_urls: None,
        }
    }
}

/// Prints the objects as multi-document YAML in apply order: ServiceAccount, then each Role
/// followed by its RoleBinding. Every document starts with `---`, so outputs of several
/// operators can be concatenated into one file. k8s-openapi serializes `apiVersion` and
/// `kind` itself.
pub fn to_yaml(rendered: &RenderedRbac) -> Result<String, serde_norway::Error> {
    let mut docs = vec![serde_norway::to_string(&rendered.service_account)?];
    for (role, binding) in &rendered.roles {
        docs.push(serde_norway::to_string(role)?);
        docs.push(serde_norway::to_string(binding)?);
    }
    Ok(docs.iter().map(|doc| format!("---\n{doc}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const MYSQL_RULES: &[Rule] = &[
        Rule::new("apps", &["statefulsets"], &["get", "list", "watch", "create", "patch", "delete"]),
        Rule::new(CORE_GROUP, &["pods"], &["get", "list", "watch"]),
        Rule::new(CORE_GROUP, &["services"], &["get", "list", "watch", "create", "patch", "delete"]),
        Rule::new(CORE_GROUP, &["secrets"], &["get"]).with_resource_names(&["mysql-root"]),
        Rule::new("statecraft.io", &["mysqlclusters", "mysqlclusters/status"], &["get", "list", "watch", "patch"]),
    ];

    fn mysql() -> OperatorRbac {
        OperatorRbac::with_base_rules("statecraft-mysql", "databases", MYSQL_RULES.iter().copied())
    }

    fn refuse(rules: &[Rule]) -> RbacError {
        validate(rules).expect_err("rules must be refused")
    }

    #[test]
    fn valid_rules_render_linked_objects() {
        let r = render(&mysql()).expect("valid rules render");
        let [(own, own_binding), (role, binding)] = &r.roles[..] else { panic!("two roles: {:?}", r.roles) };

        for (meta, name) in [
            (&r.service_account.metadata, "statecraft-mysql"),
            (&role.metadata, "statecraft-mysql"),
            (&binding.metadata, "statecraft-mysql"),
            (&own.metadata, "statecraft-mysql-self"),
            (&own_binding.metadata, "statecraft-mysql-self"),
        ] {
            assert_eq!(meta.name.as_deref(), Some(name));
            assert_eq!(meta.namespace.as_deref(), Some("databases"));
            let labels = meta.labels.as_ref().expect("labels");
            assert_eq!(labels["app.kubernetes.io/name"], "statecraft-mysql");
            assert_eq!(labels["app.kubernetes.io/part-of"], "statecraft");
            assert_eq!(labels["app.kubernetes.io/managed-by"], "statecraft");
        }

        for (rb, role) in [(binding, "statecraft-mysql"), (own_binding, "statecraft-mysql-self")] {
            assert_eq!(rb.role_ref.api_group, "rbac.authorization.k8s.io");
            assert_eq!(rb.role_ref.kind, "Role");
            assert_eq!(rb.role_ref.name, role);
            let subjects = rb.subjects.as_deref().expect("subjects");
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].kind, "ServiceAccount");
            assert_eq!(subjects[0].name, "statecraft-mysql");
            assert_eq!(subjects[0].namespace.as_deref(), Some("databases"));
        }
        assert_eq!(own.rules, Some(normalize(&self_rules())));

        let rules = role.rules.as_deref().expect("rules");
        let find = |group: &str, resource: &str| {
            rules
                .iter()
                .find(|p| {
                    p.api_groups.as_deref() == Some(&[group.to_owned()][..])
                        && p.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == resource))
                })
                .unwrap_or_else(|| panic!("no rule for {group:?} {resource}"))
        };
        assert!(!rules.iter().any(|p| p.api_groups == Some(vec!["coordination.k8s.io".into()])), "no Lease here");
        assert_eq!(find("events.k8s.io", "events").verbs, ["list", "create", "patch"]);
        let secrets = find("", "secrets");
        assert_eq!(secrets.verbs, ["get"]);
        assert_eq!(secrets.resource_names.as_deref(), Some(&["mysql-root".to_owned()][..]));
        // Same group and verbs: one rule lists both resources.
        assert_eq!(
            find("", "services").resources.as_deref(),
            Some(&["services".to_owned()][..]),
            "services get more verbs than pods, so they stay apart"
        );
        assert_eq!(
            find("statecraft.io", "mysqlclusters").resources.as_deref(),
            Some(&["mysqlclusters".to_owned(), "mysqlclusters/status".to_owned()][..])
        );
        assert!(rules.iter().all(|p| p.non_resource_urls.is_none()));
    }

    #[test]
    fn base_and_self_rules_are_valid_and_minimal() {
        let base = base_rules();
        validate(&base).expect("base rules are valid");
        let groups: Vec<_> = base.iter().map(|r| r.api_group).collect();
        assert_eq!(groups, ["events.k8s.io"], "kube's Recorder writes events.k8s.io only: no core events");
        let own = self_rules();
        validate(&own).expect("self rules are valid");
        let groups: Vec<_> = own.iter().map(|r| r.api_group).collect();
        assert_eq!(groups, ["coordination.k8s.io", CORE_GROUP]);
        assert_eq!((own[1].resources, own[1].verbs), (&["pods"][..], &["get"][..]), "its own pod, read once");
    }

    #[test]
    fn each_watched_namespace_gets_the_rules_and_the_lease_stays_home() {
        let watched = ["shop".to_string(), "billing".to_string(), "shop".to_string()];
        let r = render(&mysql().watching(&watched)).expect("renders");
        let placed: Vec<_> = r
            .roles
            .iter()
            .map(|(role, binding)| {
                assert_eq!(role.metadata, binding.metadata);
                let subject = &binding.subjects.as_deref().expect("subjects")[0];
                assert_eq!(subject.namespace.as_deref(), Some("databases"), "the ServiceAccount stays home");
                (role.metadata.namespace.as_deref().unwrap_or(""), role.metadata.name.as_deref().unwrap_or(""))
            })
            .collect();
        assert_eq!(
            placed,
            [("databases", "statecraft-mysql-self"), ("shop", "statecraft-mysql"), ("billing", "statecraft-mysql")],
            "no data rights in its own namespace unless watched; each namespace once"
        );
        assert_eq!(r.roles[1].0.rules, r.roles[2].0.rules);
        let err = render(&mysql().watching(&["Shop".to_string()])).expect_err("refused");
        assert!(err.to_string().contains("watched namespace \"Shop\""), "{err}");
        assert!(render(&mysql().watching(&[])).is_err(), "watching nothing");
    }

    /// Every kind of refused rule, with the text its error must contain to name the rule.
    #[test]
    fn invalid_rules_are_refused_naming_the_rule() {
        let ok = Rule::new(CORE_GROUP, &["pods"], &["get"]);
        /// The refused rule, the violation it must give, and a piece of its message.
        type Case = (Rule, fn(&Violation) -> bool, &'static str);
        let cases: &[Case] = &[
            (Rule::new("*", &["pods"], &["get"]), |v| matches!(v, Violation::WildcardGroup(_)), r#"apiGroup: "*""#),
            (Rule::new("apps", &["*"], &["get"]), |v| matches!(v, Violation::WildcardResource(_)), "resources: [*]"),
            (Rule::new("", &["pods/*"], &["get"]), |v| matches!(v, Violation::WildcardResource(_)), "pods/*"),
            (Rule::new("apps", &["deployments"], &["*"]), |v| matches!(v, Violation::WildcardVerb), "verbs: [*]"),
            (
                Rule::new("", &["nodes"], &["get"]),
                |v| matches!(v, Violation::ClusterScoped { .. }),
                "resources: [nodes]",
            ),
            (Rule::new("", &["namespaces"], &["list"]), |v| matches!(v, Violation::ClusterScoped { .. }), "namespaces"),
            (
                Rule::new("", &["nodes/status"], &["get"]),
                |v| matches!(v, Violation::ClusterScoped { .. }),
                "nodes/status",
            ),
            (
                Rule::new("apiextensions.k8s.io", &["customresourcedefinitions"], &["get"]),
                |v| matches!(v, Violation::ClusterScoped { .. }),
                "customresourcedefinitions",
            ),
            (
                Rule::new("rbac.authorization.k8s.io", &["clusterroles"], &["get"]),
                |v| matches!(v, Violation::ClusterScoped { .. }),
                "clusterroles",
            ),
            (
                Rule::new("rbac.authorization.k8s.io", &["roles"], &["get", "escalate"]),
                |v| *v == Violation::EscalationVerb("escalate".into()),
                "verbs: [get, escalate]",
            ),
            (
                Rule::new("rbac.authorization.k8s.io", &["roles"], &["bind"]),
                |v| *v == Violation::EscalationVerb("bind".into()),
                "verbs: [bind]",
            ),
            (
                Rule::new("", &["serviceaccounts"], &["impersonate"]),
                |v| *v == Violation::EscalationVerb("impersonate".into()),
                "verbs: [impersonate]",
            ),
            (
                Rule::new("rbac.authorization.k8s.io", &["roles"], &["get", "patch"]),
                |v| matches!(v, Violation::RbacWrite { verb, .. } if verb == "patch"),
                "resources: [roles]",
            ),
            (
                Rule::new("rbac.authorization.k8s.io", &["rolebindings"], &["create"]),
                |v| matches!(v, Violation::RbacWrite { .. }),
                "resources: [rolebindings]",
            ),
            (Rule::new("", &["pods"], &[]), |v| *v == Violation::EmptyVerbs, "verbs: []"),
            (Rule::new("", &[], &["get"]), |v| *v == Violation::EmptyResources, "resources: []"),
            (
                Rule::new("", &["pods"], &["get", "fetch"]),
                |v| *v == Violation::UnknownVerb("fetch".into()),
                "verbs: [get, fetch]",
            ),
            (Rule::new("", &["pods"], &["GET"]), |v| *v == Violation::UnknownVerb("GET".into()), "GET"),
            (Rule::new("", &["Pods"], &["get"]), |v| matches!(v, Violation::InvalidResource(_)), "Pods"),
            (Rule::new("", &[""], &["get"]), |v| matches!(v, Violation::InvalidResource(_)), "resources: []"),
            (
                Rule::new("apps/v1", &["deployments"], &["get"]),
                |v| matches!(v, Violation::InvalidGroup { .. }),
                "apps/v1",
            ),
            (Rule::new("core", &["pods"], &["get"]), |v| matches!(v, Violation::InvalidGroup { .. }), r#""core""#),
            (
                Rule::new("", &["secrets"], &["get"]).with_resource_names(&[]),
                |v| *v == Violation::EmptyResourceNames,
                "resourceNames: []",
            ),
            (
                Rule::new("", &["secrets"], &["get", "create"]).with_resource_names(&["a"]),
                |v| *v == Violation::NotRestrictableByName("create".into()),
                "resourceNames: [a]",
            ),
        ];
        for (bad, is_expected, shown) in cases {
            let err = refuse(&[ok, *bad]);
            let violation = err.violation().expect("a rule violation");
            assert!(is_expected(violation), "{bad}: unexpected {violation:?}");
            let message = err.to_string();
            assert!(message.starts_with("RBAC rules[1] "), "{message}");
            assert!(message.contains(shown), "message {message:?} should contain {shown:?}");
            assert!(message.contains(&bad.to_string()), "message {message:?} should show the rule");

            // The same rule makes rendering fail, and converts to a permanent error.
            let rbac = OperatorRbac::new("op", "ns", [ok, *bad]);
            let err: crate::Error = render(&rbac).expect_err("render refuses").into();
            assert_eq!(err.category(), crate::ErrorCategory::Permanent);
        }
    }

    #[test]
    fn invalid_names_are_refused() {
        for (name, namespace) in [("", "ns"), ("Op", "ns"), ("op", "-ns"), ("op", "a.b"), (&*"x".repeat(64), "ns")] {
            let err = render(&OperatorRbac::new(name, namespace, base_rules())).expect_err("refused");
            assert!(matches!(err, RbacError::InvalidName { .. }), "{name:?}/{namespace:?}: {err}");
        }
    }

    #[test]
    fn reading_roles_is_allowed() {
        validate(&[Rule::new("rbac.authorization.k8s.io", &["roles", "rolebindings"], &["get", "list", "watch"])])
            .expect("read-only access to roles is fine");
    }

    #[test]
    fn rendering_is_deterministic_whatever_the_order_or_split() {
        let canonical = mysql();
        let mut reversed = canonical.clone();
        reversed.rules.reverse();
        // The same grants, split differently, duplicated and overlapping.
        let split = OperatorRbac::new(
            "statecraft-mysql",
            "databases",
            [
                Rule::new("statecraft.io", &["mysqlclusters/status"], &["patch", "get", "list", "watch"]),
                Rule::new(CORE_GROUP, &["services"], &["delete", "patch"]),
                Rule::new("events.k8s.io", &["events"], &["patch", "list", "create"]),
                Rule::new(CORE_GROUP, &["secrets"], &["get"]).with_resource_names(&["mysql-root"]),
                Rule::new(CORE_GROUP, &["pods", "services"], &["watch", "list", "get"]),
                Rule::new(CORE_GROUP, &["services"], &["create", "get"]),
                Rule::new("apps", &["statefulsets"], &["get", "list", "watch", "create", "patch", "delete"]),
                Rule::new("statecraft.io", &["mysqlclusters"], &["get", "list", "watch", "patch"]),
                Rule::new(CORE_GROUP, &["pods"], &["get"]).with_resource_names(&["mysql-0"]),
            ],
        );
        let expected = to_yaml(&render(&canonical).expect("renders")).expect("yaml");
        for other in [&reversed, &split] {
            assert_eq!(to_yaml(&render(other).expect("renders")).expect("yaml"), expected);
        }
    }

    #[test]
    fn merging_keeps_names_separate_and_drops_what_is_already_granted() {
        let rules = [
            Rule::new(CORE_GROUP, &["secrets"], &["get", "update"]).with_resource_names(&["b", "a"]),
            Rule::new(CORE_GROUP, &["configmaps"], &["get", "update"]).with_resource_names(&["a", "b"]),
            Rule::new(CORE_GROUP, &["secrets"], &["get"]),
            Rule::new(CORE_GROUP, &["secrets"], &["get"]),
        ];
        let policy = normalize(&rules);
        let view: Vec<_> = policy
            .iter()
            .map(|p| (p.resources.clone().unwrap_or_default(), p.resource_names.clone(), p.verbs.clone()))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            view,
            [
                (s(&["configmaps"]), Some(s(&["a", "b"])), s(&["get", "update"])),
                (s(&["secrets"]), None, s(&["get"])),
                (s(&["secrets"]), Some(s(&["a", "b"])), s(&["update"])),
            ]
        );
    }

    #[test]
    fn yaml_documents_have_api_version_and_kind_in_apply_order() {
        let rendered = render(&mysql()).expect("renders");
        let yaml = to_yaml(&rendered).expect("yaml");

        let docs: Vec<serde_norway::Value> = serde_norway::Deserializer::from_str(&yaml)
            .map(|doc| serde_norway::Value::deserialize(doc).expect("each document parses"))
            .collect();
        let kinds: Vec<_> = docs.iter().map(|d| (d["apiVersion"].as_str(), d["kind"].as_str())).collect();
        let role = (Some("rbac.authorization.k8s.io/v1"), Some("Role"));
        let binding = (Some("rbac.authorization.k8s.io/v1"), Some("RoleBinding"));
        assert_eq!(kinds, [(Some("v1"), Some("ServiceAccount")), role, binding, role, binding]);

        // And back into the typed objects, unchanged.
        let mut typed = serde_norway::Deserializer::from_str(&yaml);
        let sa = ServiceAccount::deserialize(typed.next().expect("doc 1")).expect("ServiceAccount");
        let mut roles = Vec::new();
        while let Some(doc) = typed.next() {
            let role = Role::deserialize(doc).expect("Role");
            roles.push((role, RoleBinding::deserialize(typed.next().expect("its binding")).expect("RoleBinding")));
        }
        assert_eq!(RenderedRbac { service_account: sa, roles }, rendered);
    }

    #[test]
    fn yaml_golden() {
        let rbac = OperatorRbac::with_base_rules(
            "statecraft-etcd",
            "etcd",
            [Rule::new(CORE_GROUP, &["pods", "services"], &["get", "list", "watch"])],
        );
        let expected = "\
---
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    app.kubernetes.io/managed-by: statecraft
    app.kubernetes.io/name: statecraft-etcd
    app.kubernetes.io/part-of: statecraft
  name: statecraft-etcd
  namespace: etcd
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  labels:
    app.kubernetes.io/managed-by: statecraft
    app.kubernetes.io/name: statecraft-etcd
    app.kubernetes.io/part-of: statecraft
  name: statecraft-etcd-self
  namespace: etcd
rules:
- apiGroups:
  - ''
  resources:
  - pods
  verbs:
  - get
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - get
  - watch
  - create
  - update
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  labels:
    app.kubernetes.io/managed-by: statecraft
    app.kubernetes.io/name: statecraft-etcd
    app.kubernetes.io/part-of: statecraft
  name: statecraft-etcd-self
  namespace: etcd
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: statecraft-etcd-self
subjects:
- kind: ServiceAccount
  name: statecraft-etcd
  namespace: etcd
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  labels:
    app.kubernetes.io/managed-by: statecraft
    app.kubernetes.io/name: statecraft-etcd
    app.kubernetes.io/part-of: statecraft
  name: statecraft-etcd
  namespace: etcd
rules:
- apiGroups:
  - ''
  resources:
  - pods
  - services
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - list
  - create
  - patch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  labels:
    app.kubernetes.io/managed-by: statecraft
    app.kubernetes.io/name: statecraft-etcd
    app.kubernetes.io/part-of: statecraft
  name: statecraft-etcd
  namespace: etcd
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: statecraft-etcd
subjects:
- kind: ServiceAccount
  name: statecraft-etcd
  namespace: etcd
";
        assert_eq!(to_yaml(&render(&rbac).expect("renders")).expect("yaml"), expected);
    }

    /// The list must cover every cluster-scoped type k8s-openapi knows for this cluster
    /// version, so that a new one is not silently allowed after an upgrade of the crate.
    #[test]
    fn cluster_scoped_list_covers_k8s_openapi() {
        use k8s_openapi::{ClusterResourceScope, Resource};
        fn listed<T: Resource<Scope = ClusterResourceScope>>() -> Option<(&'static str, &'static str)> {
            let key = (T::GROUP, T::URL_PATH_SEGMENT);
            (!CLUSTER_SCOPED.contains(&key)).then_some(key)
        }
        use k8s_openapi::api as a;
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as agg;
        let missing: Vec<_> = [
            listed::<a::core::v1::ComponentStatus>(),
            listed::<a::core::v1::Namespace>(),
            listed::<a::core::v1::Node>(),
            listed::<a::core::v1::PersistentVolume>(),
            listed::<a::admissionregistration::v1alpha1::MutatingAdmissionPolicy>(),
            listed::<a::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding>(),
            listed::<a::admissionregistration::v1::MutatingWebhookConfiguration>(),
            listed::<a::admissionregistration::v1::ValidatingAdmissionPolicy>(),
            listed::<a::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(),
            listed::<a::admissionregistration::v1::ValidatingWebhookConfiguration>(),
            listed::<ext::CustomResourceDefinition>(),
            listed::<agg::APIService>(),
            listed::<a::authentication::v1::SelfSubjectReview>(),
            listed::<a::authentication::v1::TokenReview>(),
            listed::<a::authorization::v1::SelfSubjectAccessReview>(),
            listed::<a::authorization::v1::SelfSubjectRulesReview>(),
            listed::<a::authorization::v1::SubjectAccessReview>(),
            listed::<a::certificates::v1::CertificateSigningRequest>(),
            listed::<a::certificates::v1beta1::ClusterTrustBundle>(),
            listed::<a::flowcontrol::v1::FlowSchema>(),
            listed::<a::flowcontrol::v1::PriorityLevelConfiguration>(),
            listed::<a::apiserverinternal::v1alpha1::StorageVersion>(),
            listed::<a::networking::v1::IngressClass>(),
            listed::<a::networking::v1::IPAddress>(),
            listed::<a::networking::v1::ServiceCIDR>(),
            listed::<a::node::v1::RuntimeClass>(),
            listed::<a::rbac::v1::ClusterRoleBinding>(),
            listed::<a::rbac::v1::ClusterRole>(),
            listed::<a::resource::v1beta2::DeviceClass>(),
            listed::<a::resource::v1alpha3::DeviceTaintRule>(),
            listed::<a::resource::v1beta2::ResourceSlice>(),
            listed::<a::scheduling::v1::PriorityClass>(),
            listed::<a::storage::v1::CSIDriver>(),
            listed::<a::storage::v1::CSINode>(),
            listed::<a::storage::v1::StorageClass>(),
            listed::<a::storage::v1::VolumeAttachment>(),
            listed::<a::storage::v1beta1::VolumeAttributesClass>(),
            listed::<a::storagemigration::v1alpha1::StorageVersionMigration>(),
        ]
        .into_iter()
        .flatten()
        .collect();
        assert!(missing.is_empty(), "add to CLUSTER_SCOPED: {missing:?}");
        assert_eq!(CLUSTER_SCOPED.len(), 38, "one entry per (group, resource) above");
    }
}
