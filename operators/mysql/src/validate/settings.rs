//! The server settings `spec.serverConfig` may not hold: those the operator sets itself,
//! and those that would quietly break replication, re-seeding, point-in-time recovery or
//! the promise that an acknowledged write survives a failover. One table ([`REFUSED`])
//! feeds both the operator's check ([`refusal`]) and the CRD's admission rule
//! ([`cel_rules`]), so the two cannot drift apart. docs/mysql.md ("Settings the operator
//! manages") lists the same groups for users.

/// A group of refused settings and why they are refused. Names are normalised (see
/// [`normalize_setting`]); a prefix refuses every setting starting with it.
#[derive(Debug)]
pub struct Refused {
    /// Exact setting names.
    pub names: &'static [&'static str],
    /// Name prefixes (a family of settings).
    pub prefixes: &'static [&'static str],
    /// Why, as the end of the sentence "spec.serverConfig.<key> <why>".
    pub why: &'static str,
}

/// Every refused setting, by reason.
pub const REFUSED: &[Refused] = &[
    Refused {
        names: &[
            "server_id",
            "report_host",
            "port",
            "bind_address",
            "socket",
            "datadir",
            "skip_networking",
            "skip_grant_tables",
        ],
        prefixes: &[],
        why: "is set by the operator: it identifies the member and how the operator and the other members reach it",
    },
    Refused {
        names: &[
            "log_bin",
            "log_basename",
            "log_slave_updates",
            "log_replica_updates",
            "binlog_format",
            "enforce_gtid_consistency",
        ],
        prefixes: &["gtid_"],
        why: "is set by the operator: GTID replication, failover, re-seeding and point-in-time recovery depend on it",
    },
    Refused {
        names: &[
            "relay_log",
            "relay_log_recovery",
            "sync_relay_log",
            "sync_relay_log_info",
            "sync_master_info",
            "sync_source_info",
            "relay_log_info_repository",
            "master_info_repository",
            "skip_slave_start",
            "skip_replica_start",
        ],
        prefixes: &[],
        why: "is set by the operator or left at the server's default on purpose: a replica recovers from a crash \
              by discarding its relay log and fetching again from its source, and replicates only when the \
              operator starts it",
    },
    Refused {
        names: &["read_only", "super_read_only"],
        prefixes: &[],
        why: "is set by the operator: only the primary it chooses may accept writes",
    },
    Refused {
        names: &["sync_binlog", "innodb_flush_log_at_trx_commit"],
        prefixes: &[],
        why: "is set by the operator to 1: an acknowledged commit must be on disk, in the binary log and in \
              InnoDB, to survive a crash",
    },
    Refused {
        names: &["plugin_load", "plugin_load_add"],
        prefixes: &["rpl_semi_sync_"],
        why: "is set by the operator: lossless semi-synchronous replication (spec.semiSync) depends on it",
    },
    Refused {
        names: &["slave_skip_errors", "replica_skip_errors", "slave_exec_mode", "replica_exec_mode"],
        prefixes: &[],
        why: "is refused: a replica would skip transactions it fails to apply and silently diverge from the \
              primary, so a failover could lose or change acknowledged data",
    },
    Refused {
        names: &["binlog_do_db", "binlog_ignore_db"],
        prefixes: &["replicate_"],
        why: "is refused: it filters what is logged or replicated, so replicas, re-seeded members and \
              point-in-time restores would miss transactions the primary committed",
    },
    Refused {
        names: &["expire_logs_days", "binlog_expire_logs_seconds"],
        prefixes: &[],
        why: "is refused: purged binary logs break re-seeding a member from the primary and the binary log \
              archive of point-in-time recovery",
    },
];

/// Most settings `spec.serverConfig` holds (bounds the cost of the admission rule).
pub const MAX_SETTINGS: usize = 128;
/// Longest value of a setting (likewise).
pub const MAX_VALUE_LENGTH: usize = 4096;

/// The one value-dependent guard: the doublewrite buffer must stay on.
const DOUBLEWRITE: &str = "innodb_doublewrite";
/// Values of [`DOUBLEWRITE`] that keep it on (MySQL's `DETECT_AND_RECOVER`, MariaDB's
/// `fast` too), lower case.
const DOUBLEWRITE_ON: &[&str] = &["on", "1", "true", "detect_and_recover", "fast"];
/// Why [`DOUBLEWRITE`] must stay on.
const DOUBLEWRITE_WHY: &str = "must stay ON (or 1, DETECT_AND_RECOVER, FAST): without the doublewrite buffer \
                               a crash can leave torn pages that crash recovery cannot repair";

/// Prefixes the servers' option parser (`my_getopt`) reads as "this boolean option, off"
/// (`skip_`, `disable_`) or "on" (`enable_`): `skip-log-bin` is `log_bin` switched off.
const SWITCHES: &[&str] = &["skip_", "disable_", "enable_"];

/// Normalises a my.cnf option name as the servers do: case-insensitive, `-` equals `_`,
/// and a `loose_` prefix only suppresses unknown-option errors.
pub fn normalize_setting(key: &str) -> String {
    let k = key.trim().to_ascii_lowercase().replace('-', "_");
    k.strip_prefix("loose_").map(str::to_string).unwrap_or(k)
}

fn refused_group(name: &str) -> Option<&'static Refused> {
    REFUSED.iter().find(|g| g.names.contains(&name) || g.prefixes.iter().any(|p| name.starts_with(p)))
}

/// Why setting `key` (normalised) to `value` is refused, if it is: its own name or, once a
/// [`SWITCHES`] prefix is taken off, the option it switches, is in [`REFUSED`]; or it turns
/// the doublewrite buffer off.
pub fn refusal(key: &str, value: &str) -> Option<&'static str> {
    let switched = SWITCHES.iter().find_map(|s| Some((*s, key.strip_prefix(s)?)));
    if let Some(group) = refused_group(key).or_else(|| switched.and_then(|(_, base)| refused_group(base))) {
        return Some(group.why);
    }
    let value = value.trim().to_ascii_lowercase();
    let doublewrite_on = match switched {
        Some((switch, DOUBLEWRITE)) => switch == "enable_" && (value.is_empty() || DOUBLEWRITE_ON.contains(&&*value)),
        _ if key == DOUBLEWRITE => DOUBLEWRITE_ON.contains(&&*value),
        _ => true,
    };
    (!doublewrite_on).then_some(DOUBLEWRITE_WHY)
}

/// The CRD's `x-kubernetes-validations` on `spec.serverConfig`: the same refusals as
/// [`refusal`] (but for `enable-innodb-doublewrite` turned off by its value), at admission,
/// naming the first offending key. Its cost is bounded by the schema's limits on the map
/// ([`MAX_SETTINGS`], [`MAX_VALUE_LENGTH`]). The keys are normalised in
/// CEL as [`normalize_setting`] does (lower case, `-` as `_`, `loose_` and a switch prefix
/// matched as optional).
pub fn cel_rules() -> serde_json::Value {
    let mut names: Vec<String> = Vec::new();
    for g in REFUSED {
        names.extend(g.names.iter().map(|n| n.to_string()));
        names.extend(g.prefixes.iter().map(|p| format!("{p}.*")));
    }
    let norm = "k.lowerAscii().replace('-', '_')";
    let refused = format!("^(loose_)?((skip|disable|enable)_)?({})$", names.join("|"));
    let doublewrite_on = DOUBLEWRITE_ON.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ");
    // The value is looked at only for the doublewrite buffer itself: switched off by name
    // (`skip-`, `disable-`) it is refused whatever the value. `enable-innodb-doublewrite`
    // with an "off" value is left to the operator's check.
    let doublewrite_off = format!(
        "{norm}.matches('^(loose_)?((skip|disable)_)?{DOUBLEWRITE}$') && \
         !({norm}.matches('^(loose_)?{DOUBLEWRITE}$') && self[k].trim().lowerAscii() in [{doublewrite_on}])"
    );
    let first = |cond: &str| format!("'spec.serverConfig.' + self.filter(k, {cond})[0]");
    let refused_cond = format!("{norm}.matches('{refused}')");
    serde_json::json!([
        {
            "rule": format!("!self.exists(k, {refused_cond})"),
            "messageExpression": format!(
                "{} + ' is managed by the operator or breaks replication, re-seeding or point-in-time recovery \
                 (see \"Settings the operator manages\" in the MySQL operator docs)'",
                first(&refused_cond)
            ),
            "reason": "FieldValueForbidden",
        },
        {
            "rule": format!("!self.exists(k, {doublewrite_off})"),
            "messageExpression": format!("{} + ' {DOUBLEWRITE_WHY}'", first(&doublewrite_off)),
            "reason": "FieldValueForbidden",
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(key: &str, value: &str) -> bool {
        refusal(&normalize_setting(key), value).is_some()
    }

    #[test]
    fn settings_that_break_replication_or_recovery_are_refused_in_any_spelling() {
        for key in [
            "slave_skip_errors",
            "Slave-Skip-Errors",
            "replica-skip-errors",
            "loose_slave_skip_errors",
            "slave_exec_mode",
            "replicate_do_db",
            "replicate-ignore-db",
            "replicate_do_table",
            "replicate_ignore_table",
            "replicate_wild_do_table",
            "Replicate-Wild-Ignore-Table",
            "replicate_rewrite_db",
            "replicate_same_server_id",
            "binlog_do_db",
            "binlog-ignore-db",
            "expire_logs_days",
            "binlog_expire_logs_seconds",
            "loose_sync_binlog",
            "innodb_flush_log_at_trx_commit",
            "sync_relay_log",
            "relay_log_recovery",
            "relay_log_info_repository",
            "master_info_repository",
            "gtid_domain_id",
            "log_bin",
            "log_slave_updates",
            "log_replica_updates",
            "binlog_format",
            "read_only",
            "super_read_only",
            "server_id",
            "skip_slave_start",
            "rpl_semi_sync_master_enabled",
            "plugin_load",
            "plugin-load-add",
        ] {
            assert!(refused(key, "1"), "{key}");
        }
    }

    #[test]
    fn switch_prefixes_cannot_turn_a_refused_option_off() {
        for key in ["skip-log-bin", "disable_log_bin", "skip-log-slave-updates", "loose-skip-log-replica-updates"] {
            assert!(refused(key, ""), "{key}");
        }
    }

    #[test]
    fn the_doublewrite_buffer_stays_on() {
        for value in ["0", "OFF", "off", "false", "DETECT_ONLY", ""] {
            assert_eq!(refusal("innodb_doublewrite", value), Some(DOUBLEWRITE_WHY), "{value:?}");
        }
        for value in ["1", "ON", " on ", "DETECT_AND_RECOVER", "fast"] {
            assert_eq!(refusal("innodb_doublewrite", value), None, "{value:?}");
        }
        assert!(refused("skip-innodb-doublewrite", ""));
        assert!(refused("loose_disable_innodb_doublewrite", "1"));
        assert!(!refused("enable-innodb-doublewrite", ""));
    }

    #[test]
    fn ordinary_settings_pass() {
        for key in [
            "max_connections",
            "innodb_buffer_pool_size",
            "slave_parallel_threads",
            "skip_name_resolve",
            "max_binlog_size",
        ] {
            assert!(!refused(key, "1"), "{key}");
        }
    }

    #[test]
    fn the_admission_rule_lists_every_refused_setting() {
        let rules = cel_rules().to_string();
        for g in REFUSED {
            for n in g.names.iter().chain(g.prefixes) {
                assert!(rules.contains(n), "{n} missing from {rules}");
            }
        }
    }
}
