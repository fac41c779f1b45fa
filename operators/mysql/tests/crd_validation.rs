//! The CRDs installed into a real kube-apiserver reject invalid objects with a message that
//! names the field, and accept valid ones. Schema and CEL rules are the API server's job, so
//! only a real one shows that they work (the CEL expressions compile, cost limits hold).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use statecraft_mysql::MysqlOperator;
use statecraft_mysql::api::{DeletionPolicy, MySQLBackup, MySQLCluster, MySQLDatabase, MySQLRestore, MySQLUser};
use statecraft_mysql::build::config::config_map;
use statecraft_mysql::build::jobs::{JobParams, job};
use statecraft_mysql::build::network_policy::network_policy;
use statecraft_mysql::build::pdb::pdb;
use statecraft_mysql::build::secret::{Passwords, secret};
use statecraft_mysql::build::services::{headless_service, read_only_service, read_write_service};
use statecraft_mysql::build::statefulset::statefulset;
use statecraft_mysql::build::{MAX_CLUSTER_NAME, Names};
use statecraft_mysql::validate::settings::REFUSED;
use statecraft_mysql::validate::validate;
use statecraft_shared::runner::Operator;
use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};
use statecraft_shared::testing::apiserver::ApiServer;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const NS: &str = "crd";

async fn install(client: &Client) -> TestResult {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in MysqlOperator::crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    // Established, and served: a list succeeds for every kind.
    let started = Instant::now();
    loop {
        let ok = Api::<MySQLCluster>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok()
            && Api::<MySQLBackup>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok()
            && Api::<MySQLRestore>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok();
        if ok {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err("the CRDs were not served within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn cluster(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "mysql.statecraft.io/v1alpha1",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn valid_spec() -> Value {
    json!({"flavor": "mariadb", "version": "10.11", "replicas": 3, "storage": {"size": "1Gi"}})
}

/// A `spec.podTemplate` with every knob set.
fn placed() -> Value {
    json!({
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
            ]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "placed"}}}
            ]}
        },
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        "priorityClassName": "databases",
        "imagePullSecrets": [{"name": "registry"}],
        "labels": {"team": "payments"},
        "annotations": {"example.com/owner": "dba"},
    })
}

fn with(mut spec: Value, key: &str, value: Value) -> Value {
    spec[key] = value;
    spec
}

/// Creates `object` as raw JSON (invalid objects must reach the server, so they do not go
/// through the typed structs); returns the API server's error text, or None when accepted.
async fn create<K: kube::Resource<DynamicType = ()> + Clone>(api: &Api<K>, object: Value) -> Option<String> {
    let resource = ApiResource::erase::<K>(&());
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(api.clone().into_client(), api.namespace().unwrap_or(NS), &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("test objects are objects");
    dynamic.create(&PostParams::default(), &object).await.err().map(|e| e.to_string())
}

async fn patch_spec(api: &Api<MySQLCluster>, name: &str, spec: Value) -> Option<String> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await.err().map(|e| e.to_string())
}

/// How the API server reports a rejected field, to tell it from a message that only
/// mentions the field (`spec.replicas must be between spec.autoScaling.minReplicas ...`).
fn invalid(field: &str) -> String {
    format!("{field}: Invalid value")
}

fn assert_rejected(result: Option<String>, field: &str) {
    let message = result.unwrap_or_else(|| panic!("accepted, but should be rejected naming {field}"));
    assert!(message.contains(field), "the rejection should name {field}: {message}");
}

/// One API server for both halves (schema and CEL rules; the builders' objects): starting
/// one costs seconds.
#[tokio::test]
async fn the_api_server_enforces_the_crd_rules_and_accepts_the_built_objects() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    install(&client).await?;
    let clusters: Api<MySQLCluster> = Api::namespaced(client.clone(), NS);

    // A valid cluster is accepted, with defaults filled in.
    assert_eq!(create(&clusters, cluster("ok", valid_spec())).await, None);
    let ok = clusters.get("ok").await?;
    assert!(ok.spec.semi_sync.enabled);
    for n in [1, 5] {
        assert_eq!(create(&clusters, cluster(&format!("ok{n}"), with(valid_spec(), "replicas", json!(n)))).await, None);
    }

    // Names: the longest that fits is accepted (its built objects too, below); one character
    // more, a dot or a leading digit cannot name the StatefulSet or Services: refused,
    // naming metadata.name.
    let longest = "l".repeat(MAX_CLUSTER_NAME);
    assert_eq!(create(&clusters, cluster(&longest, valid_spec())).await, None);
    for bad in ["l".repeat(MAX_CLUSTER_NAME + 1), "my.db".into(), "1db".into()] {
        assert_rejected(create(&clusters, cluster(&bad, valid_spec())).await, "metadata.name");
    }

    // Replicas: odd and at most 5.
    for n in [2, 4, 7, 0] {
        let result = create(&clusters, cluster(&format!("r{n}"), with(valid_spec(), "replicas", json!(n)))).await;
        assert_rejected(result, "spec.replicas");
    }
    // Unknown flavor, bad storage size.
    assert_rejected(
        create(&clusters, cluster("f", with(valid_spec(), "flavor", json!("postgres")))).await,
        "spec.flavor",
    );
    let bad_size = with(valid_spec(), "storage", json!({"size": "lots"}));
    assert_rejected(create(&clusters, cluster("s", bad_size)).await, "spec.storage.size");

    assert_rejected(
        create(&clusters, cluster("v", with(valid_spec(), "version", json!("latest")))).await,
        "spec.version",
    );
    let backup_policy = json!({
        "schedule": "0 3 * * *",
        "retention": {"maxAge": "7w"},
        "location": {"bucket": "x", "credentialsSecret": {"name": "s3"}},
    });
    let bad_age = with(valid_spec(), "backup", backup_policy);
    assert_rejected(create(&clusters, cluster("a", bad_age)).await, "spec.backup.retention.maxAge");
    // A semi-sync timeout below a day is an explicit opt-out of the no-loss claim.
    let short = with(valid_spec(), "semiSync", json!({"timeoutSeconds": 3600}));
    assert_rejected(create(&clusters, cluster("st", short)).await, "spec.semiSync.acceptAsyncFallback");
    let accepted = with(valid_spec(), "semiSync", json!({"timeoutSeconds": 3600, "acceptAsyncFallback": true}));
    assert_eq!(create(&clusters, cluster("sa", accepted)).await, None);
    // Re-seeding broken replicas: not sooner than 30 s.
    let hasty = with(valid_spec(), "autoHeal", json!({"reseedErrant": true, "reseedBrokenAfterSeconds": 10}));
    assert_rejected(create(&clusters, cluster("h", hasty)).await, "spec.autoHeal.reseedBrokenAfterSeconds");
    let heal = with(valid_spec(), "autoHeal", json!({"reseedErrant": true, "reseedBrokenAfterSeconds": 300}));
    assert_eq!(create(&clusters, cluster("heal", heal)).await, None);
    assert_eq!(clusters.get("heal").await?.spec.auto_heal.reseed_broken_after_seconds, Some(300));

    // Auto-scaling: valid bounds are accepted, with the defaults filled in.
    let scaling = |fields: Value| {
        let mut a = json!({"minReplicas": 1, "maxReplicas": 5, "scaleOutAbove": 100, "scaleInBelow": 10});
        for (k, v) in fields.as_object().unwrap() {
            a[k] = v.clone();
        }
        with(valid_spec(), "autoScaling", a)
    };
    assert_eq!(create(&clusters, cluster("scaling", scaling(json!({})))).await, None);
    let stored = clusters.get("scaling").await?.spec.auto_scaling.expect("autoScaling kept");
    assert_eq!(
        (stored.scale_out_after_seconds, stored.scale_in_after_seconds, stored.metric),
        (60, 600, statecraft_mysql::api::ScalingMetric::ClientConnections)
    );
    let lag = scaling(json!({"metric": "ReplicationLag", "minReplicas": 3}));
    assert_eq!(create(&clusters, cluster("scaling-lag", lag)).await, None);
    // spec.replicas outside the bounds.
    let outside = with(scaling(json!({"minReplicas": 3})), "replicas", json!(1));
    assert_rejected(create(&clusters, cluster("as1", outside)).await, &invalid("spec.replicas"));
    let outside = with(scaling(json!({"maxReplicas": 3})), "replicas", json!(5));
    assert_rejected(create(&clusters, cluster("as2", outside)).await, &invalid("spec.replicas"));
    // Thresholds that would flap.
    for below in [100, 150] {
        let flapping = scaling(json!({"scaleInBelow": below}));
        assert_rejected(create(&clusters, cluster("as3", flapping)).await, &invalid("spec.autoScaling.scaleInBelow"));
    }
    // Even or out-of-range bounds, inverted bounds.
    for n in [2, 4] {
        let even = scaling(json!({"minReplicas": n}));
        assert_rejected(create(&clusters, cluster("as4", even)).await, &invalid("spec.autoScaling.minReplicas"));
        let even = scaling(json!({"maxReplicas": n}));
        assert_rejected(create(&clusters, cluster("as5", even)).await, &invalid("spec.autoScaling.maxReplicas"));
    }
    assert_rejected(
        create(&clusters, cluster("as6", scaling(json!({"maxReplicas": 7})))).await,
        &invalid("spec.autoScaling.maxReplicas"),
    );
    let inverted = scaling(json!({"minReplicas": 5, "maxReplicas": 3}));
    assert_rejected(create(&clusters, cluster("as7", inverted)).await, &invalid("spec.autoScaling.minReplicas"));
    // A single server has no replica to lag.
    let lag_of_one = scaling(json!({"metric": "ReplicationLag"}));
    assert_rejected(create(&clusters, cluster("as8", lag_of_one)).await, &invalid("spec.autoScaling.minReplicas"));
    // Windows too short.
    let hasty = scaling(json!({"scaleOutAfterSeconds": 5}));
    assert_rejected(create(&clusters, cluster("as9", hasty)).await, &invalid("spec.autoScaling.scaleOutAfterSeconds"));
    let hasty = scaling(json!({"scaleInAfterSeconds": 10}));
    assert_rejected(create(&clusters, cluster("as10", hasty)).await, &invalid("spec.autoScaling.scaleInAfterSeconds"));
    // Narrowing the bounds of a running cluster past its spec.replicas is refused too.
    assert_rejected(
        patch_spec(&clusters, "scaling", json!({"autoScaling": {"maxReplicas": 1}})).await,
        &invalid("spec.replicas"),
    );
    // Turning auto-scaling off again is allowed.
    assert_eq!(patch_spec(&clusters, "scaling", json!({"autoScaling": null})).await, None);
    assert_eq!(clusters.get("scaling").await?.spec.auto_scaling, None);

    // Server settings that break replication, re-seeding, point-in-time recovery or the
    // no-loss claim are refused at admission, in any spelling, naming the key; the table
    // the rule is generated from is the operator's, so both refuse the same keys.
    let settings = |key: &str, value: &str| with(valid_spec(), "serverConfig", json!({key: value}));
    let spellings = [
        ("Slave-Skip-Errors", "all"),
        ("loose_sync_binlog", "0"),
        ("replicate_wild_do_table", "app.%"),
        ("skip-log-bin", ""),
        ("LOOSE-Binlog-Expire-Logs-Seconds", "86400"),
        ("innodb_doublewrite", "OFF"),
        ("Innodb-Doublewrite", " 0 "),
        ("skip_innodb_doublewrite", "1"),
    ];
    let every_refused = REFUSED
        .iter()
        .flat_map(|g| g.names.iter().map(|n| n.to_string()).chain(g.prefixes.iter().map(|p| format!("{p}x"))));
    for (i, (key, value)) in spellings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(every_refused.map(|k| (k, "1".into())))
        .enumerate()
    {
        let spec = settings(&key, &value);
        assert_rejected(
            create(&clusters, cluster(&format!("sc{i}"), spec.clone())).await,
            &format!("spec.serverConfig.{key}"),
        );
        let typed: statecraft_mysql::api::MySQLClusterSpec = serde_json::from_value(spec)?;
        assert!(validate(&typed).is_err(), "the operator refuses {key} too");
    }
    for (key, value) in [("max_connections", "500"), ("innodb_doublewrite", "ON"), ("skip-name-resolve", "1")] {
        assert_eq!(
            create(&clusters, cluster(&format!("sc-{}", key.replace('_', "-")), settings(key, value))).await,
            None
        );
    }

    // Pod placement: every knob accepted; the keys the operator sets itself refused, the
    // key named.
    assert_eq!(create(&clusters, cluster("placed", with(valid_spec(), "podTemplate", placed()))).await, None);
    for (field, key) in [
        ("labels", "app.kubernetes.io/instance"),
        ("labels", "mysql.statecraft.io/role"),
        ("annotations", "statecraft.io/s3-endpoints"),
        ("labels", "controller-revision-hash"),
        ("annotations", "statefulset.kubernetes.io/pod-name"),
    ] {
        let spec = with(valid_spec(), "podTemplate", json!({field: {key: "x"}}));
        assert_rejected(create(&clusters, cluster("pt", spec)).await, &format!("spec.podTemplate.{field}.{key}"));
    }
    for key in ["team", "example.com/statecraft.io", "notstatecraft.io/x"] {
        let spec = with(valid_spec(), "podTemplate", json!({"labels": {key: "x"}, "annotations": {key: "y"}}));
        assert_eq!(create(&clusters, cluster("pt-ok", spec)).await, None, "{key} is the user's");
        clusters.delete("pt-ok", &Default::default()).await?;
    }

    // The metrics sidecar: accepted with its image and resources; an image with a space
    // refused, the field named.
    let exporter = json!({"enabled": true, "image": "registry.local/mysqld-exporter:v0.16.0",
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}});
    let mut exported = with(valid_spec(), "exporter", exporter);
    // With a NetworkPolicy naming clients from another namespace and an IP block of scrapers.
    exported["networkPolicy"] = json!({
        "clients": [{"namespaceSelector": {"matchLabels": {"team": "shop"}}, "podSelector": {"matchLabels": {"app": "shop"}}}],
        "metrics": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
    });
    assert_eq!(create(&clusters, cluster("exported", exported)).await, None);
    let bad = json!({"enabled": true, "image": "bad image"});
    assert_rejected(
        create(&clusters, cluster("exp-bad", with(valid_spec(), "exporter", bad))).await,
        "spec.exporter.image",
    );

    // Job deadlines: bounded, the field named.
    let policy = |deadline: i64| {
        json!({
            "schedule": "0 3 * * *",
            "location": {"bucket": "x", "credentialsSecret": {"name": "s3"}},
            "activeDeadlineSeconds": deadline,
        })
    };
    assert_rejected(
        create(&clusters, cluster("d1", with(valid_spec(), "backup", policy(59)))).await,
        "spec.backup.activeDeadlineSeconds",
    );
    assert_eq!(create(&clusters, cluster("d2", with(valid_spec(), "backup", policy(3600)))).await, None);
    let deadline = clusters.get("d2").await?.spec.backup.map(|b| b.deadline.active_deadline_seconds);
    assert_eq!(deadline, Some(Some(3600)));

    // Immutable fields; scaling and a new size are allowed (the operator judges a size
    // against the volumes: smaller ones are refused there, not here, so that a refused
    // growth can be set back).
    assert_rejected(patch_spec(&clusters, "ok", json!({"flavor": "mysql"})).await, "spec.flavor");
    assert_eq!(patch_spec(&clusters, "ok", json!({"storage": {"size": "2Gi"}})).await, None);
    assert_eq!(patch_spec(&clusters, "ok", json!({"storage": {"size": "1Gi"}})).await, None);
    assert_rejected(patch_spec(&clusters, "ok", json!({"storage": {"size": "0"}})).await, "spec.storage.size");
    assert_rejected(
        patch_spec(&clusters, "ok", json!({"storage": {"size": "1Gi", "storageClassName": "fast"}})).await,
        "spec.storage.storageClassName",
    );
    assert_eq!(patch_spec(&clusters, "ok", json!({"replicas": 5})).await, None);
    assert_rejected(patch_spec(&clusters, "ok", json!({"replicas": 6})).await, "spec.replicas");

    // Backups: valid, and immutable.
    let backups: Api<MySQLBackup> = Api::namespaced(client.clone(), NS);
    let backup = json!({
        "apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLBackup",
        "metadata": {"name": "b"}, "spec": {"clusterName": "ok"},
    });
    assert_eq!(create(&backups, backup).await, None);
    let changed = backups
        .patch("b", &PatchParams::default(), &Patch::Merge(json!({"spec": {"clusterName": "other"}})))
        .await
        .err()
        .map(|e| e.to_string());
    assert_rejected(changed, "immutable");
    for (name, deadline, accepted) in [("b-short", 30, false), ("b-long", 604_801, false), ("b-hour", 3600, true)] {
        let backup = json!({
            "apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLBackup",
            "metadata": {"name": name}, "spec": {"clusterName": "ok", "activeDeadlineSeconds": deadline},
        });
        let result = create(&backups, backup).await;
        match accepted {
            true => assert_eq!(result, None),
            false => assert_rejected(result, "spec.activeDeadlineSeconds"),
        }
    }

    // Restores: exactly one source.
    let restores: Api<MySQLRestore> = Api::namespaced(client.clone(), NS);
    let restore = |name: &str, source: Value| {
        let mut spec = json!({"target": {"name": "copy", "spec": valid_spec()}, "pointInTime": "2026-01-31T12:00:00Z"});
        for (k, v) in source.as_object().unwrap() {
            spec[k] = v.clone();
        }
        json!({"apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLRestore", "metadata": {"name": name}, "spec": spec})
    };
    assert_eq!(create(&restores, restore("r1", json!({"backupName": "b"}))).await, None);
    let location = json!({"store": {"bucket": "x", "credentialsSecret": {"name": "s3"}}, "key": "b.sql.gz"});
    assert_rejected(
        create(&restores, restore("r2", json!({"backupName": "b", "location": location}))).await,
        "spec.backupName",
    );
    assert_rejected(create(&restores, restore("r3", json!({}))).await, "spec.backupName");
    // A point in time is found through the cluster's backups: an explicit object has none.
    assert_rejected(create(&restores, restore("r4", json!({"location": location}))).await, "spec.pointInTime");
    assert_rejected(
        create(&restores, restore("r5", json!({"backupName": "b", "activeDeadlineSeconds": 0}))).await,
        "spec.activeDeadlineSeconds",
    );
    // The target's name must fit the names built from it.
    let mut dotted = restore("r6", json!({"backupName": "b"}));
    dotted["spec"]["target"]["name"] = json!("copy.1");
    assert_rejected(create(&restores, dotted).await, "spec.target.name");

    // The built objects of a valid cluster are accepted as they are, with the longest name,
    // the placement knobs and the metrics sidecar too.
    for name in ["ok", "placed", "exported", longest.as_str()] {
        let valid = validate(&clusters.get(name).await?.spec)?;
        let names = Names::new(name, NS);
        let pp = PostParams::default();
        let passwords = Passwords::generate(&mut rand::rng());
        Api::<StatefulSet>::namespaced(client.clone(), NS).create(&pp, &statefulset(&valid, &names)).await?;
        let services: Api<Service> = Api::namespaced(client.clone(), NS);
        for svc in [headless_service(&names), read_write_service(&valid, &names), read_only_service(&valid, &names)] {
            services.create(&pp, &svc).await?;
        }
        Api::<ConfigMap>::namespaced(client.clone(), NS).create(&pp, &config_map(&valid, &names)).await?;
        let stored = Api::<Secret>::namespaced(client.clone(), NS).create(&pp, &secret(&names, &passwords)).await?;
        assert_eq!(Passwords::from_secret(&stored), Some(passwords));
        Api::<PodDisruptionBudget>::namespaced(client.clone(), NS).create(&pp, &pdb(&names)).await?;
        if let Some(policy) = network_policy(&valid, &names) {
            Api::<NetworkPolicy>::namespaced(client.clone(), NS).create(&pp, &policy).await?;
        }
    }
    assert_eq!(Api::<NetworkPolicy>::namespaced(client.clone(), NS).list(&Default::default()).await?.items.len(), 1);
    let valid = validate(&clusters.get("placed").await?.spec)?;
    let pp = PostParams::default();
    // And a backup Job, with its deadline and the cluster's placement.
    let store = S3Location::new("x", "p", S3CredentialsSecretRef::new("s3"));
    let backup_job = job(&JobParams {
        name: "b-backup",
        namespace: NS,
        task: "backup",
        cluster: "ok",
        server_image: &valid.image,
        operator_image: "statecraft-mysql:dev",
        flavor: valid.spec.flavor,
        host: "ok-1.ok-hl.crd.svc",
        port: 3306,
        user: "backup",
        password_secret: ("ok-passwords", "backup-password"),
        location: &store,
        key: "ok/b.sql",
        sha256: None,
        binlogs: None,
        deadline_seconds: 3600,
        pod_template: &valid.spec.pod_template,
        tls_secret: None,
    });
    let stored = Api::<Job>::namespaced(client.clone(), NS).create(&pp, &backup_job).await?;
    let stored = stored.spec.expect("a Job has a spec");
    assert_eq!(stored.active_deadline_seconds, Some(3600));
    let pod = stored.template.spec.expect("a Job has a pod");
    assert_eq!(pod.priority_class_name.as_deref(), Some("databases"));
    assert_eq!(pod.node_selector.expect("placed")["disk"], "ssd");
    // The name rule runs on create only: an existing cluster's status is still written.
    let status = json!({"status": {"phase": "Initializing"}});
    clusters.patch_status(&longest, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

fn user(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLUser", "metadata": {"name": name}, "spec": spec})
}

fn user_spec(grants: Value) -> Value {
    json!({"clusterName": "db", "passwordSecretRef": {"name": "app-password"}, "grants": grants})
}

fn database(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLDatabase", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn the_api_server_checks_declared_accounts_and_databases() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    install(&client).await?;
    let users: Api<MySQLUser> = Api::namespaced(client.clone(), NS);
    let databases: Api<MySQLDatabase> = Api::namespaced(client.clone(), NS);

    // Valid, with the defaults filled in.
    let grants = json!([
        {"database": "shop", "privileges": ["SELECT", "INSERT", "CREATE TEMPORARY TABLES"]},
        {"database": "shop", "table": "audit", "privileges": ["SELECT"], "grantOption": true},
        {"database": "*", "privileges": ["PROCESS", "SHOW DATABASES"]},
    ]);
    let mut spec = user_spec(grants);
    spec["limits"] = json!({"maxUserConnections": 20});
    assert_eq!(create(&users, user("app", spec)).await, None);
    let app = users.get("app").await?;
    assert_eq!((app.spec.host.as_str(), app.spec.password_secret_ref.key.as_str()), ("%", "password"));
    assert_eq!(app.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(create(&databases, database("shop", json!({"clusterName": "db"}))).await, None);
    let shop = databases.get("shop").await?;
    assert_eq!((shop.spec.character_set.as_str(), shop.spec.deletion_policy), ("utf8mb4", DeletionPolicy::Retain));

    // Refused, naming the field.
    let cases = [
        ("u-root", with(user_spec(json!([])), "name", json!("root")), "spec.name"),
        ("u-exporter", with(user_spec(json!([])), "name", json!("exporter")), "spec.name"),
        ("u-quote", with(user_spec(json!([])), "name", json!("a'b")), "spec.name"),
        ("u-host", with(user_spec(json!([])), "host", json!("a b")), "spec.host"),
        ("u-super", user_spec(json!([{"database": "*", "privileges": ["SUPER"]}])), "spec.grants[0].privileges[0]"),
        (
            "u-all",
            user_spec(json!([{"database": "*", "privileges": ["ALL PRIVILEGES"]}])),
            "spec.grants[0].privileges[0]",
        ),
        ("u-none", user_spec(json!([{"database": "shop", "privileges": []}])), "spec.grants[0].privileges"),
        (
            "u-exec-table",
            user_spec(json!([{"database": "shop", "table": "t", "privileges": ["EXECUTE"]}])),
            "spec.grants[0].privileges",
        ),
        (
            "u-process-db",
            user_spec(json!([{"database": "shop", "privileges": ["PROCESS"]}])),
            "spec.grants[0].privileges",
        ),
        (
            "u-table-star",
            user_spec(json!([{"database": "*", "table": "t", "privileges": ["SELECT"]}])),
            "spec.grants[0].table",
        ),
        (
            "u-twice",
            user_spec(
                json!([{"database": "shop", "privileges": ["SELECT"]}, {"database": "shop", "privileges": ["INSERT"]}]),
            ),
            "spec.grants",
        ),
        ("u-db-quote", user_spec(json!([{"database": "a`b", "privileges": ["SELECT"]}])), "spec.grants[0].database"),
        (
            "u-max",
            with(user_spec(json!([])), "limits", json!({"maxUserConnections": -1})),
            "spec.limits.maxUserConnections",
        ),
        ("u-policy", with(user_spec(json!([])), "deletionPolicy", json!("Drop")), "spec.deletionPolicy"),
    ];
    for (name, spec, field) in cases {
        assert_rejected(create(&users, user(name, spec)).await, field);
    }
    for (name, spec, field) in [
        ("d-mysql", json!({"clusterName": "db", "name": "MySQL"}), "spec.name"),
        ("d-schema", json!({"clusterName": "db", "name": "performance_schema"}), "spec.name"),
        ("d-dot", json!({"clusterName": "db", "name": "a.b"}), "spec.name"),
        ("d-charset", json!({"clusterName": "db", "characterSet": "utf8; DROP"}), "spec.characterSet"),
        ("d-policy", json!({"clusterName": "db", "deletionPolicy": "Purge"}), "spec.deletionPolicy"),
    ] {
        assert_rejected(create(&databases, database(name, spec)).await, field);
    }

    // What names the account or database cannot change; grants and limits can.
    for change in [json!({"host": "10.%"}), json!({"name": "other"}), json!({"clusterName": "db2"})] {
        let refused = users.patch("app", &PatchParams::default(), &Patch::Merge(json!({"spec": change.clone()}))).await;
        assert_rejected(refused.err().map(|e| e.to_string()), "immutable");
    }
    let regrant = json!({"spec": {"grants": [{"database": "shop", "privileges": ["SELECT"]}], "limits": null}});
    users.patch("app", &PatchParams::default(), &Patch::Merge(regrant)).await?;
    for change in [json!({"name": "other"}), json!({"clusterName": "db2"})] {
        let refused = databases.patch("shop", &PatchParams::default(), &Patch::Merge(json!({"spec": change}))).await;
        assert_rejected(refused.err().map(|e| e.to_string()), "immutable");
    }
    databases
        .patch("shop", &PatchParams::default(), &Patch::Merge(json!({"spec": {"collation": "utf8mb4_bin"}})))
        .await?;
    Ok(())
}

/// The CRD's CEL rule and the operator's check refuse the same account names.
#[test]
fn the_crd_refuses_every_reserved_account_name() {
    let crd = serde_json::to_string(&MySQLUser::crd()).expect("serializable");
    for name in statecraft_mysql::accounts::RESERVED_USERS.iter().filter(|n| !n.is_empty()) {
        assert!(crd.contains(&format!("'{name}'")), "the CEL rule on spec.name misses {name}");
    }
}
