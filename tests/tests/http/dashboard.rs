//! The Grafana dashboard (`docs/grafana/limiter.json`), the alert rules
//! (`docs/prometheus/alerts.yml`), the metrics table of
//! `docs/operations.md` and the queries of the README and the guides
//! cannot drift from the code: every metric and label they name is one the
//! code exports, read from the `metrics` macros in the crates' sources, and
//! every metric the code exports is on the dashboard and in the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use limiter_tests::metric_names::{Exported, exported, metrics_in_query};

/// Labels Prometheus adds to every series it scrapes.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn code_metrics() -> BTreeMap<String, Exported> {
    let metrics = exported(&workspace());
    assert!(
        metrics.len() >= 20,
        "too few metrics found in the sources: {metrics:?}"
    );
    metrics
}

/// Every PromQL query of the dashboard, with where it is.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = fs::read_to_string(workspace().join("docs/grafana/limiter.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut queries = Vec::new();
    // A folded row holds its panels.
    let panels = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| {
            let folded = panel["panels"].as_array().into_iter().flatten();
            std::iter::once(panel).chain(folded)
        });
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            queries.push((format!("panel {title:?}"), expr.to_owned()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["query"]["query"].as_str() {
            let name = variable["name"].as_str().unwrap();
            queries.push((format!("variable {name}"), query.to_owned()));
        }
    }
    queries
}

/// Every alert rule's expression, with its alert's name: a one-line
/// `expr:` or a folded block (`expr: >`) of the lines indented below it.
fn alert_queries() -> Vec<(String, String)> {
    let text = fs::read_to_string(workspace().join("docs/prometheus/alerts.yml")).unwrap();
    let mut queries = Vec::new();
    let mut alert = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- alert:") {
            alert = name.trim().to_owned();
        }
        let Some(expr) = line.strip_prefix("expr:").map(str::trim) else {
            continue;
        };
        let expr = if expr == ">" {
            let mut folded = Vec::new();
            while let Some(next) = lines.next_if(|l| l.starts_with("          ")) {
                folded.push(next.trim());
            }
            folded.join(" ")
        } else {
            expr.to_owned()
        };
        queries.push((format!("alert {alert}"), expr));
    }
    queries
}

/// Every query of the README and the guides that names a metric: each
/// inline code span, and each line of a fenced block, that names one with
/// a selector or a `by (…)` clause.
fn guide_queries() -> Vec<(String, String)> {
    let mut pages = vec![workspace().join("README.md")];
    for entry in fs::read_dir(workspace().join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            pages.push(entry.path());
        }
    }
    let mut queries = Vec::new();
    for page in pages {
        let text = fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        // Inside a fenced block: whether it is of a language that holds
        // queries (Rust and TOML name the crates `limiter_*` instead).
        let mut fenced: Option<bool> = None;
        for (number, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                fenced = match fenced {
                    Some(_) => None,
                    None => Some(!matches!(info.trim(), "rust" | "toml")),
                };
                continue;
            }
            let spans: Vec<&str> = match fenced {
                Some(true) => vec![line],
                Some(false) => Vec::new(),
                None => line.split('`').skip(1).step_by(2).collect(),
            };
            for span in spans {
                let names_metric = span.contains("limiter_")
                    && !span.contains("::")
                    && (span.contains('{') || span.contains(" by ("));
                if names_metric {
                    queries.push((format!("{name}:{}", number + 1), span.to_owned()));
                }
            }
        }
    }
    queries
}

#[test]
fn the_guides_name_only_what_the_code_exports() {
    let queries = guide_queries();
    assert!(
        queries.len() >= 5,
        "too few queries found in the guides: {queries:?}"
    );
    names_only_what_the_code_exports(queries);
}

#[test]
fn the_alert_rules_name_only_what_the_code_exports() {
    let queries = alert_queries();
    let alerts: Vec<&str> = queries.iter().map(|(place, _)| place.as_str()).collect();
    assert_eq!(
        alerts,
        [
            "alert LimiterBreakerOpen",
            "alert LimiterStoreErrors",
            "alert LimiterDecidingWithoutTheStore",
            "alert LimiterDeniesAnUnusualShare",
            "alert LimiterPenaltyBlocksNearTheirBound",
            "alert LimiterRegionOutOfTouch",
        ]
    );
    names_only_what_the_code_exports(queries);
}

#[test]
fn the_dashboard_names_only_what_the_code_exports() {
    names_only_what_the_code_exports(dashboard_queries());
}

/// Checks that each query names only metrics, and labels of them, that
/// the code exports.
fn names_only_what_the_code_exports(queries: Vec<(String, String)>) {
    let code = code_metrics();
    for (place, query) in queries {
        let used =
            metrics_in_query(&query, &code).unwrap_or_else(|e| panic!("{place}: {e} in {query}"));
        assert!(!used.is_empty(), "{place} names no metric: {query}");
        for (metric, labels) in used {
            let known = &code[&metric.name].labels;
            for label in labels {
                let allowed = known.contains(&label)
                    || TARGET_LABELS.contains(&label.as_str())
                    || (label == "le" && metric.bucket);
                assert!(
                    allowed,
                    "{place}: label {label} of {} is not exported (the code's: {known:?}): {query}",
                    metric.name
                );
            }
        }
    }
}

#[test]
fn every_exported_metric_has_a_panel() {
    let code = code_metrics();
    let mut shown = BTreeSet::new();
    for (place, query) in dashboard_queries() {
        let used = metrics_in_query(&query, &code).unwrap_or_else(|e| panic!("{place}: {e}"));
        shown.extend(used.into_iter().map(|(metric, _)| metric.name));
    }
    let missing: Vec<_> = code.keys().filter(|name| !shown.contains(*name)).collect();
    assert!(missing.is_empty(), "metrics on no panel: {missing:?}");
}

#[test]
fn the_operations_guide_documents_every_metric_as_exported() {
    let code = code_metrics();
    let guide = fs::read_to_string(workspace().join("docs/operations.md")).unwrap();
    let mut documented = BTreeMap::new();
    for row in guide.lines().filter(|l| l.starts_with("| `limiter_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_owned();
        let kind = cells[2].to_owned();
        // Label names are the backticked words of the labels cell, outside
        // the parentheses that list their values.
        let mut labels = BTreeSet::new();
        let mut depth = 0;
        for (i, part) in cells[3].split('`').enumerate() {
            if i % 2 == 1 && depth == 0 {
                labels.insert(part.to_owned());
            } else if i % 2 == 0 {
                depth += part.matches('(').count() as i32 - part.matches(')').count() as i32;
            }
        }
        documented.insert(name, (kind, labels));
    }
    for (name, exported) in &code {
        let (kind, labels) = documented
            .get(name)
            .unwrap_or_else(|| panic!("{name} is exported but not in docs/operations.md"));
        assert_eq!(kind, exported.kind, "the type of {name}");
        assert_eq!(labels, &exported.labels, "the labels of {name}");
    }
    for name in documented.keys() {
        assert!(
            code.contains_key(name),
            "{name} is documented but not exported"
        );
    }
}

#[test]
fn queries_are_read_exactly() {
    let code = code_metrics();
    let used = metrics_in_query(
        r#"sum by (limit) (rate(limiter_decisions_total{instance=~"$i", outcome="denied"}[5m])) / histogram_quantile(0.9, sum by (le) (rate(limiter_store_call_seconds_bucket[1m])))"#,
        &code,
    )
    .unwrap();
    let seen: Vec<_> = used
        .iter()
        .map(|(m, labels)| {
            (
                m.name.as_str(),
                m.bucket,
                labels.iter().cloned().collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "limiter_decisions_total",
                false,
                vec![
                    "instance".to_owned(),
                    "limit".to_owned(),
                    "outcome".to_owned()
                ]
            ),
            ("limiter_store_call_seconds", true, vec!["le".to_owned()]),
        ]
    );
    assert!(metrics_in_query("rate(limiter_no_such_total[1m])", &code).is_err());
    assert!(metrics_in_query("limiter_refunds_total_bucket", &code).is_err());
}
