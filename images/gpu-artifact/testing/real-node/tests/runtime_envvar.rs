//! NVIDIA's real container runtime (nvidia-container-runtime v1.20 from its Go module, in CDI mode, with
//! the CDI spec nvidia-ctk wrote over the mock NVML) is containerd's default runtime on the real node, as
//! bashible makes it on a NodeGroup with spec.gpu or an admin makes it anywhere. On a node the module
//! serves, its NodeGroupConfiguration gpu-nvidia-runtime-envvar.sh has refused GPUs asked for by
//! environment variable (run on the node by the test bed as bashible would): a Pod whose image says
//! NVIDIA_VISIBLE_DEVICES=all, as every CUDA base image does, sees no GPU without a claim, and a claim's
//! Pod sees exactly its own. A privileged Pod asking by that variable still gets the runtime's devices:
//! the runtime is there, and it is its setting that keeps the unprivileged ones out.

mod support;

use support::*;

/// A workload Pod whose container asks for every GPU the way a CUDA base image does.
fn asking_by_environment(name: &str, claims: &[(&str, &str)], privileged: bool) -> serde_json::Value {
    let script =
        format!("{SHOW_GPUS}; echo '## runtime devices'; ls /var/run/nvidia-container-devices 2>/dev/null; true");
    let mut pod = workload_pod(name, &script, claims, &[]);
    let container = &mut pod["spec"]["containers"][0];
    container["env"] = serde_json::json!([
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
    ]);
    if privileged {
        container["securityContext"] = serde_json::json!({"privileged": true});
    }
    pod
}

#[tokio::test]
async fn no_gpu_by_environment_variable_and_a_claim_gets_exactly_its_own() {
    let _cards = CARDS.lock().await;
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "runtime-envvar").await;

    // No claim, NVIDIA_VISIBLE_DEVICES=all: nothing.
    let out = run_to_end(&client, &ns, &asking_by_environment("no-claim", &[], false)).await;
    assert_eq!(
        gpu_lines(&out),
        Vec::<&str>::new(),
        "a Pod without a claim sees GPUs:\n{out}"
    );
    assert!(
        section(&out, "device nodes").iter().all(|l| !l.starts_with("nvidia")),
        "device nodes without a claim:\n{out}"
    );
    assert!(section(&out, "runtime devices").is_empty(), "{out}");

    // A claim of one H100 and the same variable: exactly the claimed card.
    claim(&client, &ns, "one-h100", "h100", 1, None).await;
    let pod = asking_by_environment("one-h100", &[("gpu", "one-h100")], false);
    create_pod(&client, &ns, &pod).await;
    let given: Vec<String> = allocated_uuids(&client, &ns, "one-h100")
        .await
        .into_iter()
        .map(|(_, uuid)| uuid)
        .collect();
    let out = finish_run(&client, &ns, "one-h100").await;
    let lines = gpu_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains(&given[0]), "{given:?} against\n{out}");

    // Privileged, the same variable: NVIDIA's runtime acts (its `all` device's marker mount is there).
    let out = run_to_end(&client, &ns, &asking_by_environment("privileged", &[], true)).await;
    assert_eq!(section(&out, "runtime devices"), ["void"], "{out}");
    delete_namespace(&client, &ns).await;
}
