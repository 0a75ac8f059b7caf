//! The monitoring kit in `deploy/` against a real server: the alert rules
//! pass `promtool` (syntax and their unit tests), and every metric a
//! dashboard panel or an alert rule queries is in a running server's
//! `/metrics`, with the request metrics of each endpoint.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Server;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn promtool(args: &[&str]) {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(deploy().join("prometheus"))
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool ({e}): install Debian's prometheus package (scripts/setup.sh does)")
        });
    assert!(
        output.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    promtool(&["check", "rules", "alerts.yml"]);
    promtool(&["test", "rules", "alerts_test.yml"]);
}

/// The `workerid_*` names in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("workerid_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// Every query of the dashboard and of the alert rules.
fn queries() -> Vec<String> {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy().join("grafana/workerid.json")).expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for target in targets {
            exprs.push(target["expr"].as_str().expect("expr").to_owned());
        }
    }
    let rules = std::fs::read_to_string(deploy().join("prometheus/alerts.yml")).expect("rules");
    exprs.extend(rule_exprs(&rules));
    exprs
}

/// The `expr` of every rule: on its line, or folded (`>-`) over the lines
/// indented below it.
fn rule_exprs(rules: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(expr) = line.trim().strip_prefix("expr: ") else {
            continue;
        };
        if expr != ">-" {
            exprs.push(expr.to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut folded = Vec::new();
        while let Some(next) = lines.next_if(|l| l.len() - l.trim_start().len() > indent) {
            folded.push(next.trim());
        }
        exprs.push(folded.join(" "));
    }
    exprs
}

/// Metrics that appear in `/metrics` only once something happened (an
/// error of the store, a wait for a full sequence), which a healthy
/// server's first requests do not make: each must still be one of the
/// libraries' metrics.
const ONLY_AFTER_AN_EVENT: [&str; 2] = [
    "workerid_store_operation_errors_total",
    "workerid_snowflake_sequence_waits_total",
];

#[test]
fn every_dashboard_and_alert_query_names_a_metric_the_server_exports() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(
        server.get("/alloc?biz_tag=test").0,
        200,
        "the /alloc fast path"
    );
    assert_eq!(server.get("/api/segment/get/test").0, 200);
    assert_eq!(server.get("/api/snowflake/get/any").0, 200);
    assert_eq!(server.get("/api/segment/get/nope").0, 500);
    // The pool usage comes from a listing the server makes at start.
    let started = Instant::now();
    let metrics = loop {
        let (_, metrics) = server.get("/metrics");
        if metrics.contains("workerid_pool_usage_ratio{")
            || started.elapsed() > Duration::from_secs(10)
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let exported = |name: &str| {
        metrics.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
    };
    let queries = queries();
    assert!(queries.len() >= 20, "{} queries", queries.len());
    for expr in &queries {
        let names = metric_names(expr);
        assert!(
            !names.is_empty() || expr.starts_with("up{"),
            "a query names no workerid metric: {expr}"
        );
        for name in names {
            if ONLY_AFTER_AN_EVENT.contains(&name.as_str()) {
                assert!(
                    workerid::observe::ALL_METRICS
                        .iter()
                        .any(|m| m.name == name),
                    "{name} (in {expr}) is no metric of the libraries"
                );
                continue;
            }
            assert!(
                exported(&name),
                "{name} (in {expr}) is not exported:\n{metrics}"
            );
        }
    }
    for line in [
        "workerid_http_requests_total{endpoint=\"/alloc\",status=\"200\"} 1",
        "workerid_http_requests_total{endpoint=\"/api/segment/get/{key}\",status=\"200\"} 1",
        "workerid_http_requests_total{endpoint=\"/api/segment/get/{key}\",status=\"500\"} 1",
        "workerid_http_requests_total{endpoint=\"/api/snowflake/get/{key}\",status=\"200\"} 1",
        // A client's unknown tag is told apart from the server's failures,
        // which are there from the start for the alert and the dashboard.
        "workerid_request_errors_total{code=\"unknown_tag\"} 1",
        "workerid_request_errors_total{code=\"store_unavailable\"} 0",
        // One worker ID of the default pool of 1024.
        "workerid_pool_usage_ratio{namespace=\"workerid-server\"} 0.0009765625",
        "# TYPE workerid_lease_renewal_seconds histogram",
        "# HELP workerid_snowflake_layout_remaining_seconds",
    ] {
        assert!(metrics.contains(line), "no {line:?} in:\n{metrics}");
    }
}
