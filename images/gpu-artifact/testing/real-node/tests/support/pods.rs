//! Workload Pods of the test bed's userland image on the real node, and what they printed.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{LogParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use testbed::{Progress, wait_until};

use super::{POD_DONE, WORKLOAD_IMAGE, describe};

/// A Pod of the workload image running `script` once, with claims `(name, claim name)` used by
/// its one container, on the real node.
pub fn workload_pod(name: &str, script: &str, claims: &[(&str, &str)], templates: &[(&str, &str)]) -> Value {
    let mut resource_claims: Vec<Value> = claims
        .iter()
        .map(|(n, c)| json!({"name": n, "resourceClaimName": c}))
        .collect();
    resource_claims.extend(
        templates
            .iter()
            .map(|(n, t)| json!({"name": n, "resourceClaimTemplateName": t})),
    );
    let uses: Vec<Value> = claims
        .iter()
        .chain(templates)
        .map(|(n, _)| json!({"name": n}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": resource_claims,
            "containers": [{
                "name": "main", "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "resources": {"claims": uses},
            }],
        },
    })
}

pub async fn create_pod(client: &Client, namespace: &str, pod: &Value) {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &serde_json::from_value(pod.clone()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("create Pod {}: {e}", pod["metadata"]["name"]));
}

/// Waits until Pod `name` reaches `phase` (`Running` or `Succeeded`), failing with its status.
pub async fn wait_phase(client: &Client, namespace: &str, name: &str, phase: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    wait_until(&format!("Pod {namespace}/{name} {phase}"), POD_DONE, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await?;
            let status = pod.status.clone().unwrap_or_default();
            if status.phase.as_deref() == Some(phase) {
                return Ok(Progress::Done(pod));
            }
            if status.phase.as_deref() == Some("Failed") && phase != "Failed" {
                anyhow::bail!("Pod failed: {}", serde_json::to_string(&status)?);
            }
            Ok(Progress::Pending(describe(&pod)))
        }
    })
    .await
    .unwrap()
}

/// What the Pod's container printed (through the API server and the real kubelet).
pub async fn logs(client: &Client, namespace: &str, name: &str) -> String {
    try_logs(client, namespace, name)
        .await
        .unwrap_or_else(|e| panic!("logs of {namespace}/{name}: {e}"))
}

/// The Pod's log, or why the kubelet could not give it (e.g. while it restarts).
pub async fn try_logs(client: &Client, namespace: &str, name: &str) -> kube::Result<String> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .logs(name, &LogParams::default())
        .await
}

/// Runs `script` in a workload Pod to its end and returns what it printed.
pub async fn run_to_end(client: &Client, namespace: &str, pod: &Value) -> String {
    create_pod(client, namespace, pod).await;
    finish_run(client, namespace, pod["metadata"]["name"].as_str().unwrap()).await
}

/// Waits until a created Pod has succeeded; what it printed.
pub async fn finish_run(client: &Client, namespace: &str, name: &str) -> String {
    wait_phase(client, namespace, name, "Succeeded").await;
    let out = logs(client, namespace, name).await;
    println!("--- {namespace}/{name} printed:\n{out}---");
    out
}

/// The script every GPU test container runs: what a CUDA container would look for.
pub const SHOW_GPUS: &str = "echo '## nvidia-smi -L'; nvidia-smi -L 2>&1; echo \"exit $?\"; \
    echo '## ldconfig -p'; ldconfig -p | grep -E 'libcuda|libnvidia-ml'; \
    echo '## device nodes'; ls /dev | grep -E '^nvidia' | sort; ls /dev/nvidia-caps 2>/dev/null | sort; \
    echo '## env'; env | grep -E '^(NVIDIA|CUDA)_' | sort";

/// The lines of one `## <title>` section of [`SHOW_GPUS`]' output.
pub fn section<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    out.split(&format!("## {title}\n"))
        .nth(1)
        .map(|rest| rest.lines().take_while(|l| !l.starts_with("## ")).collect())
        .unwrap_or_default()
}

/// The `GPU ...` lines of the `nvidia-smi -L` section: the cards a container sees.
pub fn gpu_lines(out: &str) -> Vec<&str> {
    section(out, "nvidia-smi -L")
        .into_iter()
        .filter(|l| l.starts_with("GPU "))
        .collect()
}

/// The `MIG ...` lines of the `nvidia-smi -L` section: the MIG devices a container sees.
pub fn mig_lines(out: &str) -> Vec<&str> {
    section(out, "nvidia-smi -L")
        .into_iter()
        .filter(|l| l.trim_start().starts_with("MIG "))
        .collect()
}
