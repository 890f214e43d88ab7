//! `kubectl get gpuclasses` as kubectl prints it: the API server's own Table (the CRD's printer
//! columns, priority 0), aligned in columns the way kubectl aligns them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use gpu_api::GPUClass;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use testbed::{Progress, wait_until};

/// Waits until every GPUClass counts as allocated exactly the devices that claims got through it
/// (distinct devices in the allocation results of requests naming its DeviceClass; claims sharing
/// one device count it once): gpu-controller recounts after the
/// claims change, so a table printed at once could show the moment before.
pub async fn wait_allocations_counted(client: &Client) {
    let claims = Api::<ResourceClaim>::all(client.clone());
    let classes = Api::<GPUClass>::all(client.clone());
    wait_until(
        "GPUClass counts of the allocated claims",
        Duration::from_secs(60),
        || async {
            let mut expected = BTreeMap::<String, BTreeSet<(String, String)>>::new();
            for claim in claims.list(&ListParams::default()).await? {
                let requests = claim
                    .spec
                    .devices
                    .as_ref()
                    .and_then(|d| d.requests.clone())
                    .unwrap_or_default();
                let results = claim
                    .status
                    .and_then(|s| s.allocation)
                    .and_then(|a| a.devices)
                    .and_then(|d| d.results)
                    .unwrap_or_default();
                for result in results {
                    let parent = result.request.split('/').next().unwrap_or_default();
                    let class = requests
                        .iter()
                        .find(|r| r.name == parent)
                        .and_then(|r| r.exactly.as_ref())
                        .map(|e| e.device_class_name.clone());
                    expected
                        .entry(class.unwrap_or_default())
                        .or_default()
                        .insert((result.pool, result.device));
                }
            }
            let mut differing = Vec::new();
            for class in classes.list(&ListParams::default()).await? {
                let counted = class
                    .status
                    .as_ref()
                    .and_then(|s| s.devices.as_ref())
                    .map_or(0, |d| d.allocated);
                let wanted = expected.get(&class.name_any()).map_or(0, |d| d.len() as i64);
                if counted != wanted {
                    differing.push(format!("{} counts {counted} of {wanted}", class.name_any()));
                }
            }
            Ok(if differing.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(differing.join(", "))
            })
        },
    )
    .await
    .unwrap();
}

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
