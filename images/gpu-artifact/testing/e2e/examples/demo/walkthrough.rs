//! What the demo prints: each section reads the API server, the fixture hosts or the mock NVML
//! state, so the walkthrough shows what the system stored and did, not what it meant to do.

use std::collections::BTreeMap;

use gpu_api::{GPUClass, PhysicalGPU};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::Value;
use testbed::TestNamespace;

use crate::plugin_node::PluginNode;
use crate::support::examples::documented_examples;

pub async fn inventory(ns: &TestNamespace, nodes: &[&PluginNode]) {
    println!("\n== PhysicalGPUs (kubectl get physicalgpus)");
    println!(
        "{:<40} {:<16} {:<14} {:<12} {:<11} {:<15} MIG",
        "NAME", "MODEL", "PCI", "DRIVER", "DriverReady", "HardwareHealthy"
    );
    let gpus = Api::<PhysicalGPU>::all(ns.client());
    for node in nodes {
        for name in &node.s.names {
            let gpu = gpus.get(name).await.unwrap();
            let status = serde_json::to_value(&gpu.status).unwrap();
            let condition = |kind: &str| {
                status["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == kind))
                    .map(|c| c["status"].as_str().unwrap_or("").to_owned())
                    .unwrap_or_default()
            };
            println!(
                "{:<40} {:<16} {:<14} {:<12} {:<11} {:<15} {}",
                name,
                gpu.labels().get("gpu.deckhouse.io/device").cloned().unwrap_or_default(),
                status["pciInfo"]["address"].as_str().unwrap_or(""),
                status["currentState"]["driverType"].as_str().unwrap_or(""),
                condition("DriverReady"),
                condition("HardwareHealthy"),
                status["currentState"]["nvidia"]["mig"]["mode"].as_str().unwrap_or("-"),
            );
        }
    }
}

/// Waits until every GPUClass of `applied` (`GPUClass/<name>`) is Ready, then prints
/// `kubectl get gpuclasses` and the DeviceClasses they became.
pub async fn gpu_classes(ns: &TestNamespace, applied: &[String]) {
    let classes = Api::<GPUClass>::all(ns.client());
    for name in applied.iter().filter_map(|label| label.strip_prefix("GPUClass/")) {
        crate::support::gpu_classes::wait_ready(&classes, name, "True", "DeviceClassReady").await;
    }
    println!("\n== GPUClasses ($ kubectl get gpuclasses)");
    for line in crate::class_table::get_gpuclasses(&ns.client()).await {
        println!("   {line}");
    }
    if applied.is_empty() {
        return;
    }
    println!("\n== DeviceClasses rendered from them (extended resource, class config)");
    let device_classes = Api::<DeviceClass>::all(ns.client());
    for class in classes.list(&ListParams::default()).await.unwrap() {
        let Some(dc) = device_classes.get_opt(&class.name_any()).await.unwrap() else {
            continue;
        };
        let config = dc
            .spec
            .config
            .as_ref()
            .and_then(|c| c.first())
            .and_then(|c| c.opaque.as_ref());
        println!(
            "   {:<12} {:<32} {}",
            dc.name_any(),
            dc.spec.extended_resource_name.clone().unwrap_or_default(),
            config.map(|o| o.parameters.0.to_string()).unwrap_or_default()
        );
    }
}

pub async fn slices(ns: &TestNamespace, nodes: &[&PluginNode]) {
    let api = Api::<ResourceSlice>::all(ns.client());
    for node in nodes {
        let name = node.s.node.name();
        let fields = format!("spec.nodeName={name}");
        // Wait for the whole generation: the publisher applies a pool slice by slice.
        let list = testbed::wait_until(
            &format!("the pool of {name}"),
            std::time::Duration::from_secs(60),
            || async {
                let list = api.list(&ListParams::default().fields(&fields)).await?;
                let complete = list.items.first().is_some_and(|first| {
                    let pool = &first.spec.pool;
                    list.items.len() as i64 == pool.resource_slice_count
                        && list.items.iter().all(|s| s.spec.pool.generation == pool.generation)
                });
                Ok(if complete {
                    testbed::Progress::Done(list)
                } else {
                    testbed::Progress::Pending(format!("{} slices", list.items.len()))
                })
            },
        )
        .await
        .unwrap();
        println!(
            "\n== ResourceSlices of node {name} (pool gpus/{name}): {} slices",
            list.items.len()
        );
        for slice in &list.items {
            let devices = slice.spec.devices.as_deref().unwrap_or_default();
            let counter_sets = slice.spec.shared_counters.as_deref().unwrap_or_default();
            let mig = devices.iter().filter(|d| d.name.contains("-mig-")).count();
            let shared = devices
                .iter()
                .filter(|d| d.allow_multiple_allocations == Some(true))
                .count();
            println!(
                "   {:<52} generation {} of {} slices: {} counter sets, {} devices ({} whole cards, {} shared offers, {} MIG placements)",
                slice.name_any(),
                slice.spec.pool.generation,
                slice.spec.pool.resource_slice_count,
                counter_sets.len(),
                devices.len(),
                devices.len() - mig - shared,
                shared,
                mig,
            );
        }
    }
}

/// Server-side applies every manifest of `docs/examples` into the namespace (cluster-scoped ones as
/// they are); returns `Kind/name` of each.
/// Applies the documented examples whose file name `wanted` accepts.
pub async fn apply_examples(ns: &TestNamespace, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let mut applied = Vec::new();
    for example in documented_examples(ns).await {
        let name = example.file.file_name().unwrap_or_default().to_string_lossy();
        if !wanted(&name) {
            continue;
        }
        example
            .api
            .patch(
                &example.object.name_any(),
                &PatchParams::apply("gpu-demo").force(),
                &Patch::Apply(&example.object),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", example.file.display()));
        applied.push(example.label);
    }
    applied
}

pub async fn claims(ns: &TestNamespace, nodes: &[&PluginNode]) {
    println!("\n== ResourceClaims in {} and where they were prepared", ns.name());
    let claims = ns.api::<ResourceClaim>().list(&ListParams::default()).await.unwrap();
    for claim in &claims.items {
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        let devices: Vec<String> = results.iter().map(|r| format!("{}/{}", r.pool, r.device)).collect();
        let owner = claim
            .owner_references()
            .first()
            .map(|o| o.name.clone())
            .unwrap_or_default();
        println!(
            "   claim {:<36} of pod {:<12} -> {}",
            claim.name_any(),
            owner,
            devices.join(", ")
        );
        for node in nodes {
            if let Some(prepared) = node.kubelet.prepared(ns.name(), &owner)
                && let Some(ids) = prepared.get(&claim.name_any())
            {
                println!("      prepared on {}: CDI {}", node.s.node.name(), ids.join(", "));
            }
        }
    }
}

pub fn cdi_files(nodes: &[&PluginNode]) {
    for node in nodes {
        let dir = node.host().join("var/run/cdi");
        println!("\n== CDI specs written on {} ({})", node.s.node.name(), dir.display());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let spec: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            println!("   {}", file.file_name().unwrap().to_string_lossy());
            for device in spec["devices"].as_array().into_iter().flatten() {
                let edits = &device["containerEdits"];
                let nodes: Vec<&str> = edits["deviceNodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n["path"].as_str())
                    .collect();
                let env: Vec<&str> = edits["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                println!(
                    "      {}: env {:?}, device nodes {:?}",
                    device["name"].as_str().unwrap_or(""),
                    env,
                    nodes
                );
            }
        }
    }
}

pub fn mig_instances(nodes: &[&PluginNode]) {
    for node in nodes {
        let state = node.mock.state().snapshot().unwrap();
        let mut per_card: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (card, gpu) in &state.gpus {
            let instances = gpu
                .gpu_instances
                .iter()
                .map(|gi| {
                    let uuid = gi
                        .compute_instances
                        .first()
                        .map(|ci| ci.uuid.as_str())
                        .unwrap_or("no compute instance");
                    format!(
                        "GI {} profile {} slices {}-{} ({uuid})",
                        gi.id,
                        gi.profile_id,
                        gi.placement.start,
                        gi.placement.start + gi.placement.size - 1
                    )
                })
                .collect();
            per_card.insert(
                format!("{card} MIG {}", if gpu.mig_current { "on" } else { "off" }),
                instances,
            );
        }
        println!("\n== MIG instances in the mock NVML of {}", node.s.node.name());
        if per_card.is_empty() {
            println!("   none: no card of this node was partitioned");
        }
        for (card, instances) in per_card {
            println!(
                "   {card}: {}",
                if instances.is_empty() {
                    "none".to_owned()
                } else {
                    instances.join("; ")
                }
            );
        }
    }
}
