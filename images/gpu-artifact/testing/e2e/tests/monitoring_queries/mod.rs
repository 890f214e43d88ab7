//! Reading the module's monitoring and a component's `/metrics` as Prometheus does: the `gpu_*`
//! metric names the rules and dashboards of `monitoring/` query, and the series and metric names a
//! scrape serves (a counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`).

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::support::components::repo_root;

/// The `/metrics` text of the component listening on loopback `port`.
pub fn scrape(port: u16) -> anyhow::Result<String> {
    let out = std::process::Command::new("curl")
        .args(["-fsS", "--max-time", "5", &format!("http://127.0.0.1:{port}/metrics")])
        .output()?;
    anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// The series of one scrape: name, labels, value.
pub type Series = Vec<(String, BTreeMap<String, String>, f64)>;

/// Parses the sample lines of the text format (`name{a="x",b="y"} value`).
pub fn series(text: &str) -> Series {
    let mut all = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(inner) = rest.strip_prefix('{') {
            let mut chars = inner.char_indices().peekable();
            let mut key = String::new();
            let mut end = inner.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '}' => {
                        end = i + 1;
                        break;
                    }
                    ',' => {}
                    '=' => {
                        chars.next(); // the opening quote
                        let mut value = String::new();
                        while let Some((_, c)) = chars.next() {
                            match c {
                                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                                '"' => break,
                                _ => value.push(c),
                            }
                        }
                        labels.insert(std::mem::take(&mut key), value);
                    }
                    _ => key.push(c),
                }
            }
            rest = &inner[end..];
        }
        let value = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN);
        all.push((line[..name_end].to_owned(), labels, value));
    }
    all
}

/// The sum of the series `name` whose labels include `labels`; None when there is none.
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<f64> = series(text)
        .into_iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, _, v)| v)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// Every name a PromQL query can use on this scrape: the samples, and each family's series names
/// by type (a family without samples yet is still served).
pub fn served_names(text: &str) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = series(text).into_iter().map(|(name, _, _)| name).collect();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let mut parts = family.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "summary" => &["", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
    }
    names
}

/// The metric names of a PromQL expression that start with `gpu_`: identifiers outside string
/// literals and label matchers.
pub fn gpu_metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    let mut chars = expr.chars();
    let mut keep = |word: &mut String| {
        if word.starts_with("gpu_") {
            names.insert(word.clone());
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                keep(&mut word);
                let mut escaped = false;
                for inner in chars.by_ref() {
                    if !escaped && inner == c {
                        break;
                    }
                    escaped = inner == '\\' && !escaped;
                }
            }
            '{' => {
                keep(&mut word);
                let mut quote = None;
                for inner in chars.by_ref() {
                    match (quote, inner) {
                        (None, '}') => break,
                        (None, '"' | '\'') => quote = Some(inner),
                        (Some(q), _) if inner == q => quote = None,
                        _ => {}
                    }
                }
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == ':' => word.push(c),
            _ => keep(&mut word),
        }
    }
    keep(&mut word);
    names
}

/// Every `gpu_*` name queried in `monitoring/`, with the files that query it.
pub fn queried_gpu_metrics() -> BTreeMap<String, BTreeSet<String>> {
    let monitoring = repo_root().join("monitoring");
    let mut exprs: Vec<(String, String)> = Vec::new();
    let files = |dir: &str, ext: &str| -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        let mut pending = vec![monitoring.join(dir)];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == ext) {
                    found.push(path);
                }
            }
        }
        found
    };
    for path in files("prometheus-rules", "yaml") {
        let groups: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for rule in groups
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
        {
            exprs.push((path.display().to_string(), rule["expr"].as_str().unwrap().to_owned()));
        }
    }
    for path in files("grafana-dashboards", "json") {
        let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let targets = dashboard["panels"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["expr"].as_str().map(str::to_owned));
        let variables = dashboard["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["type"] == "query")
            .filter_map(|v| v["query"].as_str().or(v["query"]["query"].as_str()).map(str::to_owned));
        for expr in targets.chain(variables) {
            exprs.push((path.display().to_string(), expr));
        }
    }
    let mut queried: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, expr) in exprs {
        for name in gpu_metric_names(&expr) {
            queried.entry(name).or_default().insert(file.clone());
        }
    }
    queried
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_queries_and_scrapes_as_prometheus_reads_them() {
        assert_eq!(
            gpu_metric_names(
                r#"sum by (node) (rate(gpu_handler_claim_operations_total{result="failure", x="gpu_fake"}[5m])) / on (UUID) group_left (gpu) gpu_physicalgpu_info"#
            ),
            BTreeSet::from([
                "gpu_handler_claim_operations_total".to_owned(),
                "gpu_physicalgpu_info".to_owned()
            ])
        );
        let text = "# TYPE gpu_x counter\n# TYPE gpu_h histogram\n# TYPE gpu_g gauge\ngpu_g{a=\"1\",b=\"q\\\"}\"} 2\n";
        let names = served_names(text);
        for name in ["gpu_x_total", "gpu_h_bucket", "gpu_h_sum", "gpu_h_count", "gpu_g"] {
            assert!(names.contains(name), "{name}: {names:?}");
        }
        assert!(!names.contains("gpu_x") && !names.contains("gpu_h"), "{names:?}");
        assert_eq!(value(text, "gpu_g", &[("b", "q\"}")]), Some(2.0));
        assert_eq!(value(text, "gpu_g", &[("a", "2")]), None);
    }
}
