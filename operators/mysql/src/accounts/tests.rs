//! The plans against generated observations: applying a plan to what was observed gives
//! what was declared, and a second plan is then empty (nothing is written to a server that
//! is as declared). The statements themselves run against a real server in
//! `tests/accounts.rs`.

use proptest::prelude::*;

use super::*;
use crate::api::user::Privilege;

const PRIVILEGES: [&str; 6] = ["SELECT", "INSERT", "UPDATE", "DELETE", "LOCK TABLES", "DELETE HISTORY"];

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![
        Just(Scope::Global),
        Just(Scope::database("app")),
        Just(Scope::database("my_app")),
        Just(Scope::Table("app".into(), "orders".into())),
    ]
}

fn privileges() -> impl Strategy<Value = Privileges> {
    (proptest::sample::subsequence(PRIVILEGES.to_vec(), 1..=4), any::<bool>()).prop_map(|(names, grant_option)| {
        Privileges { names: names.into_iter().map(String::from).collect(), grant_option }
    })
}

fn grant_map() -> impl Strategy<Value = GrantMap> {
    proptest::collection::btree_map(scope(), privileges(), 0..4)
}

/// What the server does with the changes, as far as the plan relies on it.
fn apply(mut map: GrantMap, changes: &[GrantChange]) -> GrantMap {
    for c in changes {
        match c {
            GrantChange::Grant { scope, names, grant_option } => {
                let p = map.entry(scope.clone()).or_default();
                p.names.extend(names.iter().cloned());
                p.grant_option |= grant_option;
            }
            GrantChange::Revoke { scope, names } => {
                if let Some(p) = map.get_mut(scope) {
                    for n in names {
                        p.names.remove(n);
                    }
                }
            }
            GrantChange::RevokeGrantOption { scope } => {
                if let Some(p) = map.get_mut(scope) {
                    p.grant_option = false;
                }
            }
        }
    }
    // A scope left without privileges is no longer listed.
    map.retain(|_, p| !p.names.is_empty());
    map
}

proptest! {
    #[test]
    fn a_plan_reaches_the_declaration_and_then_plans_nothing(desired in grant_map(), observed in grant_map()) {
        let changes = plan_grants(&desired, &observed);
        let reached = apply(observed.clone(), &changes);
        prop_assert_eq!(&reached, &desired, "changes: {:?}", changes);
        prop_assert!(plan_grants(&desired, &reached).is_empty());
        // Grants come first: the account never holds less than both sides in between.
        let first_revoke = changes.iter().position(|c| !matches!(c, GrantChange::Grant { .. }));
        let last_grant = changes.iter().rposition(|c| matches!(c, GrantChange::Grant { .. }));
        if let (Some(r), Some(g)) = (first_revoke, last_grant) {
            prop_assert!(g < r, "{:?}", changes);
        }
    }

    #[test]
    fn an_account_as_declared_gets_no_statement(grants in grant_map(), limits in any::<[u32; 4]>()) {
        let desired = DesiredUser {
            account: Account::new("app", "%"),
            password: "pw".into(),
            password_changed: false,
            limits: limits.map(u64::from),
            grants: grants.clone(),
        };
        let observed = ObservedUser { limits: limits.map(u64::from), grants };
        prop_assert!(plan_user(&desired, Some(&observed)).is_empty());
    }
}

fn user(grants: &[Grant]) -> DesiredUser {
    DesiredUser {
        account: Account::new("app", "10.0.%"),
        password: "it's\\secret".into(),
        password_changed: false,
        limits: [5, 0, 0, 0],
        grants: desired_grants(grants),
    }
}

fn grant(privileges: &[Privilege], database: &str, table: &str, grant_option: bool) -> Grant {
    Grant { privileges: privileges.to_vec(), database: database.into(), table: table.into(), grant_option }
}

#[test]
fn a_new_account_is_created_with_its_password_limits_and_grants() {
    let d = user(&[grant(&[Privilege::Select, Privilege::Insert], "shop", "*", false)]);
    let sql: Vec<String> = plan_user(&d, None).iter().map(|s| s.expose().to_string()).collect();
    assert_eq!(
        sql,
        [
            "CREATE USER IF NOT EXISTS 'app'@'10.0.%' IDENTIFIED BY 'it''s\\\\secret' WITH MAX_USER_CONNECTIONS 5 \
             MAX_QUERIES_PER_HOUR 0 MAX_UPDATES_PER_HOUR 0 MAX_CONNECTIONS_PER_HOUR 0",
            "ALTER USER 'app'@'10.0.%' IDENTIFIED BY 'it''s\\\\secret' WITH MAX_USER_CONNECTIONS 5 \
             MAX_QUERIES_PER_HOUR 0 MAX_UPDATES_PER_HOUR 0 MAX_CONNECTIONS_PER_HOUR 0",
            "GRANT INSERT, SELECT ON `shop`.* TO 'app'@'10.0.%'",
        ]
    );
    assert!(!format!("{:?} {:?}", d, plan_user(&d, None)).contains("secret"), "nothing shows the password");
}

#[test]
fn a_changed_password_or_limit_is_set_alone() {
    let mut d = user(&[]);
    let observed = ObservedUser { limits: [5, 0, 0, 0], grants: GrantMap::new() };
    assert!(plan_user(&d, Some(&observed)).is_empty());
    d.password_changed = true;
    d.limits = [5, 100, 0, 0];
    let sql: Vec<String> = plan_user(&d, Some(&observed)).iter().map(|s| s.expose().to_string()).collect();
    assert_eq!(sql.len(), 2);
    assert!(sql[0].starts_with("ALTER USER 'app'@'10.0.%' IDENTIFIED BY "), "{}", sql[0]);
    assert!(sql[1].contains("MAX_QUERIES_PER_HOUR 100") && !sql[1].contains("IDENTIFIED"), "{}", sql[1]);
}

#[test]
fn scopes_are_quoted_and_a_database_underscore_is_no_wildcard() {
    assert_eq!(Scope::of(&grant(&[Privilege::Process], "*", "*", false)).to_string(), "*.*");
    assert_eq!(Scope::of(&grant(&[Privilege::Select], "my_app", "*", false)).to_string(), "`my\\_app`.*");
    assert_eq!(Scope::of(&grant(&[Privilege::Select], "my_app", "t_1", false)).to_string(), "`my_app`.`t_1`");
    assert_eq!(identifier("a`b"), "`a``b`");
}

#[test]
fn the_grant_option_alone_is_granted_and_revoked() {
    let a = Account::new("app", "%");
    let mut have = desired_grants(&[grant(&[Privilege::Select], "shop", "*", false)]);
    let want = desired_grants(&[grant(&[Privilege::Select], "shop", "*", true)]);
    let up: Vec<String> = plan_grants(&want, &have).iter().map(|c| c.sql(&a)).collect();
    assert_eq!(up, ["GRANT SELECT ON `shop`.* TO 'app'@'%' WITH GRANT OPTION"]);
    have = want.clone();
    let down = desired_grants(&[grant(&[Privilege::Select], "shop", "*", false)]);
    let sql: Vec<String> = plan_grants(&down, &have).iter().map(|c| c.sql(&a)).collect();
    assert_eq!(sql, ["REVOKE GRANT OPTION ON `shop`.* FROM 'app'@'%'"]);
}

#[test]
fn databases_are_created_once_and_altered_only_when_their_defaults_differ() {
    let d = DesiredDatabase { name: "shop".into(), character_set: "utf8mb4".into(), collation: None };
    assert_eq!(plan_database(&d, None).as_deref(), Some("CREATE DATABASE IF NOT EXISTS `shop` CHARACTER SET utf8mb4"));
    let same = ObservedDatabase { character_set: "utf8mb4".into(), collation: "utf8mb4_general_ci".into() };
    assert_eq!(plan_database(&d, Some(&same)), None, "any collation of the set when none is declared");
    let d = DesiredDatabase { collation: Some("utf8mb4_bin".into()), ..d };
    assert_eq!(
        plan_database(&d, Some(&same)).as_deref(),
        Some("ALTER DATABASE `shop` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    );
}

#[test]
fn the_operators_and_the_servers_accounts_are_reserved() {
    for user in ["statecraft", "repl", "root", "backup", "exporter", "mariadb.sys", "PUBLIC", ""] {
        assert!(Account::new(user, "%").is_reserved(), "{user}");
    }
    assert!(!Account::new("app", "%").is_reserved());
}
