//! The MySQLUser and MySQLDatabase controllers: read (the cluster, its primary, the password
//! Secret) → validate → observe the primary → plan ([`crate::accounts`]) → apply → status.
//!
//! Both apply on the primary as `root` (see [`crate::accounts`] for why that account), only
//! what differs, and check again every minute: a password Secret cannot be watched (the
//! operator may not list Secrets), and an account changed by hand is put back. A resource
//! that names the same account (or database) as an older one is refused, so that deleting
//! either never drops what the other declares. Deleting a resource drops the account or the
//! database per its `deletionPolicy`, through a finalizer, on the primary; with the cluster
//! gone or stopped there is nothing to drop it from, and the resource goes with a Warning.

use std::sync::Arc;
use std::time::Duration;

use crate::build::ordinal_of;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use statecraft_shared::finalizer::{FinalizerEvent, with_finalizer};
use statecraft_shared::reason::{Common, Reason};
use statecraft_shared::secrets::read_opted_in;
use statecraft_shared::status::{ConditionType, patch_status, report_invalid_spec, set_condition};
use statecraft_shared::{Error, Result};

use super::Context;
use crate::accounts::server::Session;
use crate::accounts::{
    Account, DesiredDatabase, DesiredUser, RESERVED_DATABASES, desired_grants, limit_values, plan_database, plan_user,
};
use crate::api::{DeletionPolicy, MySQLCluster, MySQLDatabase, MySQLDatabaseStatus, MySQLUser, MySQLUserStatus};
use crate::build::secret::Passwords;
use crate::build::{MYSQL_PORT, Names};
use crate::clustering::dataplane::Endpoint;
use crate::flavor::ROOT_USER;
use crate::reason::MySql;

/// The label a Secret needs, with the value `"true"`, before its value becomes an
/// account's password.
pub const PASSWORD_OPT_IN_LABEL: &str = "mysql.statecraft.io/user-password";
/// Finalizer of MySQLUsers: drops the account per `deletionPolicy`.
pub const USER_FINALIZER: &str = "mysql.statecraft.io/account";
/// Finalizer of MySQLDatabases: drops the database per `deletionPolicy`.
pub const DATABASE_FINALIZER: &str = "mysql.statecraft.io/database";

/// How often a resource as declared is checked again (password Secret, changes by hand).
const RECHECK: Duration = Duration::from_secs(60);
/// How soon a wait (no primary yet, no cluster, no Secret) is looked at again.
const WAIT: Duration = Duration::from_secs(10);

/// Something the resource waits for, as its Ready condition says.
struct Wait {
    reason: Reason,
    message: String,
}

impl Wait {
    fn new(reason: impl Into<Reason>, message: impl Into<String>) -> Self {
        Wait { reason: reason.into(), message: message.into() }
    }
}

/// A session as `root` on the primary of cluster `name`, or what is missing.
async fn primary(ctx: &Context, name: &str) -> Result<std::result::Result<Session, Wait>> {
    let rt = &ctx.rt;
    let clusters: Api<MySQLCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let cluster = clusters.get_opt(name).await.map_err(|e| Error::kube(format!("reading MySQLCluster {name}"), e))?;
    let Some(cluster) = cluster else {
        return Ok(Err(Wait::new(Common::ClusterNotFound, format!("MySQLCluster {name:?} does not exist"))));
    };
    let names = Names::new(name, &rt.namespace);
    let member = cluster.status.as_ref().and_then(|s| s.members.iter().find(|m| m.role == "primary" && m.ready));
    let Some(ordinal) = member.and_then(|m| ordinal_of(name, &m.name)) else {
        return Ok(Err(Wait::new(MySql::WaitingForPrimary, format!("MySQLCluster {name:?} has no writable primary"))));
    };
    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let secret = secrets
        .get_opt(&names.secret())
        .await
        .map_err(|e| Error::kube(format!("reading Secret {}", names.secret()), e))?;
    let Some(passwords) = secret.as_ref().and_then(Passwords::from_secret) else {
        return Ok(Err(Wait::new(MySql::WaitingForPrimary, format!("Secret {} has no passwords yet", names.secret()))));
    };
    let tls = match &cluster.spec.tls {
        None => None,
        Some(tls) => match super::certificates::serving(rt, tls, &names).await? {
            Some(serving) => Some(serving.client),
            None => {
                let message = format!("MySQLCluster {name:?} has no certificate yet");
                return Ok(Err(Wait::new(MySql::WaitingForPrimary, message)));
            }
        },
    };
    let endpoint = Endpoint { host: names.pod_host(ordinal), port: MYSQL_PORT as u16 };
    let session = Session::connect(&endpoint, ROOT_USER, &passwords.root, tls.as_ref()).await?;
    Ok(Ok(session))
}

/// The name of the object among `others` (same kind, same namespace) that is older than
/// `me` and declares the same thing (`same`): `me` then yields to it.
fn older_claimant<K: Resource>(me: &K, others: &[K], same: impl Fn(&K) -> bool) -> Option<String> {
    let key = |k: &K| (k.meta().creation_timestamp.clone().map(|t| t.0), k.name_any());
    let mine = key(me);
    others.iter().filter(|o| o.uid() != me.uid() && same(o)).map(key).filter(|k| *k < mine).min().map(|(_, n)| n)
}

/// Sets Ready in `conditions`; publishes a Warning when a refusal or wait is new.
async fn report(
    ctx: &Context,
    obj: &(impl Resource<DynamicType = ()> + Sync),
    conditions: &mut Vec<Condition>,
    ready: bool,
    reason: impl Into<Reason> + Copy,
    message: &str,
) {
    let changed = set_condition(conditions, ConditionType::Ready, ready, reason, message, obj.meta().generation);
    if changed && !ready {
        ctx.rt.events.warning(obj, reason, "Wait", message.to_string()).await;
    }
}

/// The account a MySQLUser declares (its name defaults to the resource's), validated.
pub fn account_of(user: &MySQLUser) -> Result<Account> {
    let name = user.spec.name.clone().unwrap_or_else(|| user.name_any());
    let account = Account::new(name, user.spec.host.clone());
    if account.is_reserved() {
        return Err(Error::invalid_spec(
            "spec.name",
            format!("{:?} is an account the operator or the server keeps", account.user),
        ));
    }
    if account.user.len() > 80 {
        return Err(Error::invalid_spec(
            "spec.name",
            "at most 80 characters: set spec.name when the resource's name is longer",
        ));
    }
    Ok(account)
}

/// The database a MySQLDatabase declares (its name defaults to the resource's), validated.
pub fn database_of(db: &MySQLDatabase) -> Result<String> {
    let name = db.spec.name.clone().unwrap_or_else(|| db.name_any());
    if RESERVED_DATABASES.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(Error::invalid_spec("spec.name", format!("{name:?} is a schema the server keeps")));
    }
    if name.len() > 64 || name.contains('.') {
        return Err(Error::invalid_spec(
            "spec.name",
            "at most 64 characters and no '.': set spec.name when the resource's name is not a valid database name",
        ));
    }
    Ok(name)
}

/// Reconciles one MySQLUser.
pub async fn reconcile_user(user: Arc<MySQLUser>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<MySQLUser> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    with_finalizer(&api, USER_FINALIZER, user, |event| async {
        match event {
            FinalizerEvent::Apply(u) => apply_user(&api, &u, &ctx).await,
            FinalizerEvent::Cleanup(u) => remove_user(&u, &ctx).await,
        }
    })
    .await
}

async fn apply_user(api: &Api<MySQLUser>, user: &MySQLUser, ctx: &Context) -> Result<Action> {
    let account = account_of(user);
    if let Err(e) = &account {
        report_invalid_spec(&ctx.rt, user, |s: &mut MySQLUserStatus| &mut s.conditions, e).await?;
    }
    let account = account?;
    let mut status = user.status.clone().unwrap_or_default();
    let outcome = converge_user(api, user, &account, &mut status, ctx).await;
    let action = conclude(ctx, user, &mut status.conditions, outcome).await;
    patch_status(api, user, user.status.as_ref(), &status, ctx.rt.field_manager).await?;
    action
}

/// Sets Ready from a pass's outcome (the Ready message, a wait, or an error) and says when
/// to look again.
async fn conclude(
    ctx: &Context,
    obj: &(impl Resource<DynamicType = ()> + Sync),
    conditions: &mut Vec<Condition>,
    outcome: Result<std::result::Result<String, Wait>>,
) -> Result<Action> {
    match outcome {
        Ok(Ok(message)) => {
            report(ctx, obj, conditions, true, MySql::Declared, &message).await;
            Ok(Action::requeue(RECHECK))
        }
        Ok(Err(wait)) => {
            report(ctx, obj, conditions, false, wait.reason, &wait.message).await;
            Ok(Action::requeue(WAIT))
        }
        Err(e) => {
            report(ctx, obj, conditions, false, e.reason(), &e.to_string()).await;
            Err(e)
        }
    }
}

/// Brings the account to its declaration and records it in `status`; the Ready message, or
/// what is waited for.
async fn converge_user(
    api: &Api<MySQLUser>,
    user: &MySQLUser,
    account: &Account,
    status: &mut MySQLUserStatus,
    ctx: &Context,
) -> Result<std::result::Result<String, Wait>> {
    let cluster = &user.spec.cluster_name;
    let others = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing MySQLUsers", e))?;
    let same = |o: &MySQLUser| o.spec.cluster_name == *cluster && account_of(o).is_ok_and(|a| a == *account);
    if let Some(owner) = older_claimant(user, &others.items, same) {
        let message = format!("MySQLUser {owner:?} already declares {account} on cluster {cluster:?}");
        return Ok(Err(Wait::new(MySql::Conflict, message)));
    }
    let r = &user.spec.password_secret_ref;
    let password =
        match read_opted_in(ctx.rt.client.clone(), &ctx.rt.namespace, &r.name, &r.key, PASSWORD_OPT_IN_LABEL).await {
            Ok(p) => p,
            // Fixed by the user (a Secret created or labelled) or by time (an API server that
            // answers again): looked at again soon either way.
            Err(refusal) => return Ok(Err(Wait::new(MySql::PasswordSecretRefused, refusal.to_string()))),
        };
    let mut session = match primary(ctx, cluster).await? {
        Ok(p) => p,
        Err(wait) => return Ok(Err(wait)),
    };
    let desired = DesiredUser {
        account: account.clone(),
        password_changed: status.password_version.as_deref() != Some(password.version.as_str()),
        password: password.value,
        limits: limit_values(&user.spec.limits),
        grants: desired_grants(&user.spec.grants),
    };
    let observed = session.observe_user(account).await?;
    let plan = plan_user(&desired, observed.as_ref());
    session.apply(&plan).await?;
    if !plan.is_empty() {
        let note = format!("{account}: {} statement(s) applied on the primary", plan.len());
        ctx.rt.events.normal(user, MySql::AccountApplied, "Apply", note).await;
    }
    status.password_version = Some(password.version);
    status.account = Some(account.to_string());
    status.observed_generation = user.meta().generation;
    Ok(Ok(format!("{account} is on the primary as declared")))
}

async fn remove_user(user: &MySQLUser, ctx: &Context) -> Result<Action> {
    let applied = user.status.as_ref().and_then(|s| s.account.clone());
    let (Some(shown), DeletionPolicy::Delete) = (applied, user.spec.deletion_policy) else {
        // Retained, or never applied (refused, or yielding to an older resource).
        return Ok(Action::await_change());
    };
    let account = account_of(user)?;
    match primary(ctx, &user.spec.cluster_name).await? {
        Ok(mut session) => {
            session.drop_user(&account).await?;
            ctx.rt.events.normal(user, MySql::AccountDropped, "Delete", format!("{shown} dropped")).await;
            Ok(Action::await_change())
        }
        Err(wait) => release_or_wait(user, &user.spec.cluster_name, ctx, wait, &shown).await,
    }
}

/// Deleting `obj` waits for a primary of cluster `name` to drop `what` from, unless the
/// cluster is gone, being deleted or stopped: then nothing can be dropped, and the resource
/// goes with a Warning.
async fn release_or_wait(
    obj: &(impl Resource<DynamicType = ()> + Sync),
    name: &str,
    ctx: &Context,
    wait: Wait,
    what: &str,
) -> Result<Action> {
    let clusters: Api<MySQLCluster> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let cluster = clusters.get_opt(name).await.map_err(|e| Error::kube(format!("reading MySQLCluster {name}"), e))?;
    let gone = cluster.as_ref().is_none_or(|c| c.meta().deletion_timestamp.is_some() || c.spec.stopped);
    if gone {
        let note = format!("{what} was not dropped: MySQLCluster {name:?} is gone or stopped");
        ctx.rt.events.warning(obj, Common::ClusterNotFound, "Delete", note).await;
        return Ok(Action::await_change());
    }
    ctx.rt.events.warning(obj, wait.reason, "Delete", format!("dropping {what} waits: {}", wait.message)).await;
    Ok(Action::requeue(WAIT))
}

/// Reconciles one MySQLDatabase.
pub async fn reconcile_database(db: Arc<MySQLDatabase>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<MySQLDatabase> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    with_finalizer(&api, DATABASE_FINALIZER, db, |event| async {
        match event {
            FinalizerEvent::Apply(d) => apply_database(&api, &d, &ctx).await,
            FinalizerEvent::Cleanup(d) => remove_database(&d, &ctx).await,
        }
    })
    .await
}

async fn apply_database(api: &Api<MySQLDatabase>, db: &MySQLDatabase, ctx: &Context) -> Result<Action> {
    let name = database_of(db);
    if let Err(e) = &name {
        report_invalid_spec(&ctx.rt, db, |s: &mut MySQLDatabaseStatus| &mut s.conditions, e).await?;
    }
    let name = name?;
    let mut status = db.status.clone().unwrap_or_default();
    let outcome = converge_database(api, db, &name, &mut status, ctx).await;
    let action = conclude(ctx, db, &mut status.conditions, outcome).await;
    patch_status(api, db, db.status.as_ref(), &status, ctx.rt.field_manager).await?;
    action
}

/// Creates the database or sets its defaults and records it in `status`; the Ready
/// message, or what is waited for.
async fn converge_database(
    api: &Api<MySQLDatabase>,
    db: &MySQLDatabase,
    name: &str,
    status: &mut MySQLDatabaseStatus,
    ctx: &Context,
) -> Result<std::result::Result<String, Wait>> {
    let cluster = &db.spec.cluster_name;
    let others = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing MySQLDatabases", e))?;
    let same = |o: &MySQLDatabase| o.spec.cluster_name == *cluster && database_of(o).is_ok_and(|n| n == name);
    if let Some(owner) = older_claimant(db, &others.items, same) {
        let message = format!("MySQLDatabase {owner:?} already declares database {name:?} on cluster {cluster:?}");
        return Ok(Err(Wait::new(MySql::Conflict, message)));
    }
    let mut session = match primary(ctx, cluster).await? {
        Ok(p) => p,
        Err(wait) => return Ok(Err(wait)),
    };
    let desired = DesiredDatabase {
        name: name.to_string(),
        character_set: db.spec.character_set.clone(),
        collation: db.spec.collation.clone(),
    };
    let observed = session.observe_database(name).await?;
    let plan = plan_database(&desired, observed.as_ref());
    if let Some(statement) = plan {
        session.execute(&statement).await?;
        ctx.rt.events.normal(db, MySql::DatabaseApplied, "Apply", statement).await;
    }
    status.database = Some(name.to_string());
    status.observed_generation = db.meta().generation;
    Ok(Ok(format!("database {name:?} is on the primary as declared")))
}

async fn remove_database(db: &MySQLDatabase, ctx: &Context) -> Result<Action> {
    let applied = db.status.as_ref().and_then(|s| s.database.clone());
    let (Some(name), DeletionPolicy::Delete) = (applied, db.spec.deletion_policy) else {
        return Ok(Action::await_change());
    };
    match primary(ctx, &db.spec.cluster_name).await? {
        Ok(mut session) => {
            session.drop_database(&name).await?;
            let note = format!("database {name:?} dropped with its tables (deletionPolicy: Delete)");
            ctx.rt.events.normal(db, MySql::DatabaseDropped, "Delete", note).await;
            Ok(Action::await_change())
        }
        Err(wait) => release_or_wait(db, &db.spec.cluster_name, ctx, wait, &format!("database {name:?}")).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{MySQLUserSpec, PasswordSecretRef};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn user(name: &str, uid: &str, created: i64, spec_name: Option<&str>) -> MySQLUser {
        let mut u = MySQLUser::new(
            name,
            MySQLUserSpec {
                cluster_name: "db".into(),
                name: spec_name.map(String::from),
                host: "%".into(),
                password_secret_ref: PasswordSecretRef { name: "pw".into(), key: "password".into() },
                grants: vec![],
                limits: Default::default(),
                deletion_policy: DeletionPolicy::Delete,
            },
        );
        u.metadata.uid = Some(uid.into());
        u.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        u
    }

    #[test]
    fn the_older_resource_keeps_an_account_both_declare() {
        let old = user("app", "1", 100, None);
        let new = user("app-again", "2", 200, Some("app"));
        let other = user("other", "3", 50, None);
        let all = vec![old.clone(), new.clone(), other];
        let same = |o: &MySQLUser| account_of(o).ok() == Some(Account::new("app", "%"));
        assert_eq!(older_claimant(&new, &all, same), Some("app".into()));
        assert_eq!(older_claimant(&old, &all, same), None, "the older one is not refused");
    }

    #[test]
    fn reserved_or_unfit_names_are_refused_naming_the_field() {
        let err = account_of(&user("root", "1", 1, None)).unwrap_err();
        assert!(err.to_string().contains("spec.name"), "{err}");
        let long = "a".repeat(81);
        assert!(account_of(&user(&long, "1", 1, None)).is_err());
        assert_eq!(account_of(&user(&long, "1", 1, Some("app"))).unwrap(), Account::new("app", "%"));
        let db = MySQLDatabase::new("a.b", serde_json::from_value(serde_json::json!({"clusterName": "db"})).unwrap());
        assert!(database_of(&db).unwrap_err().to_string().contains("spec.name"));
        let db = MySQLDatabase::new("Mysql", serde_json::from_value(serde_json::json!({"clusterName": "db"})).unwrap());
        assert!(database_of(&db).is_err(), "reserved whatever the case");
    }
}
