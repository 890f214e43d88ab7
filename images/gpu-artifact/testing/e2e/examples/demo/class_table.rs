//! `kubectl get gpuclasses` as kubectl prints it: the API server's own Table (the CRD's printer
//! columns, priority 0), aligned in columns the way kubectl aligns them.

use kube::Client;
use serde_json::Value;

/// The rows of `kubectl get gpuclasses`, header first.
pub async fn get_gpuclasses(client: &Client) -> Vec<String> {
    let request = http::Request::get("/apis/gpu.deckhouse.io/v1alpha1/gpuclasses")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client
        .request(request)
        .await
        .expect("the server prints GPUClasses as a Table");
    let shown: Vec<(usize, String)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, c)| c["priority"].as_i64().unwrap_or(0) == 0)
        .map(|(i, c)| (i, c["name"].as_str().unwrap_or_default().to_uppercase()))
        .collect();
    let mut rows = vec![shown.iter().map(|(_, name)| name.clone()).collect::<Vec<_>>()];
    for row in table["rows"].as_array().into_iter().flatten() {
        let cells = row["cells"].as_array().unwrap();
        rows.push(
            shown
                .iter()
                .map(|(i, name)| match &cells[*i] {
                    Value::String(s) if name == "AGE" => age(s),
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..shown.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect::<Vec<_>>()
                .join("   ")
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// A creation timestamp as kubectl's short age (`45s`, `3m`).
fn age(timestamp: &str) -> String {
    let Ok(created) = timestamp.parse::<k8s_openapi::jiff::Timestamp>() else {
        return timestamp.to_owned();
    };
    let seconds = (k8s_openapi::jiff::Timestamp::now().as_second() - created.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}
