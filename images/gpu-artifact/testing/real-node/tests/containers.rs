//! What real containers on the real node get from their claims, without any NVIDIA runtime: the
//! device nodes, the driver's libraries and tools from the driver root with the dynamic linker able
//! to find them, MIG capability nodes, the MPS pipe and shared memory, the VFIO group's node; and
//! exactly their devices: nvidia-smi (through NVML) in each container lists what it was given.

mod support;

use support::*;

fn assert_driver_libraries_found(out: &str) {
    let cache = section(out, "ldconfig -p").join("\n");
    for soname in ["libcuda.so.1", "libnvidia-ml.so.1"] {
        assert!(
            cache
                .lines()
                .any(|l| l.trim_start().starts_with(soname) && l.contains("/usr/lib/x86_64-linux-gnu/")),
            "ldconfig -p lists no {soname}:\n{cache}"
        );
    }
}

#[tokio::test]
async fn two_of_eight_h100s_list_exactly_those_two() {
    let _cards = CARDS.lock().await;
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "two-h100").await;
    claim(&client, &ns, "two-h100", "h100", 2, None).await;
    let script = format!("{SHOW_GPUS}; sleep 2");
    create_pod(
        &client,
        &ns,
        &workload_pod("two-h100", &script, &[("gpu", "two-h100")], &[]),
    )
    .await;
    let mut given: Vec<String> = allocated_uuids(&client, &ns, "two-h100")
        .await
        .into_iter()
        .map(|(_, u)| u)
        .collect();
    let out = finish_run(&client, &ns, "two-h100").await;
    given.sort();
    let lines = gpu_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    let mut listed: Vec<String> = lines
        .iter()
        .map(|l| l.split("(UUID: ").nth(1).unwrap().trim_end_matches(')').to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, given, "nvidia-smi lists exactly the claim's cards");
    assert!(lines.iter().all(|l| l.contains("H100")), "{out}");
    let nodes = section(&out, "device nodes");
    assert_eq!(
        nodes
            .iter()
            .filter(|n| n.strip_prefix("nvidia").is_some_and(|m| m.parse::<u32>().is_ok()))
            .count(),
        2,
        "{nodes:?}"
    );
    for control in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
        assert!(nodes.contains(&control), "{control} missing: {nodes:?}");
    }
    assert_driver_libraries_found(&out);
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_mig_container_lists_exactly_its_mig_device() {
    let _cards = CARDS.lock().await;
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "mig").await;
    claim(&client, &ns, "mig", "mig-2g12gb", 1, None).await;
    let out = run_to_end(&client, &ns, &workload_pod("mig", SHOW_GPUS, &[("gpu", "mig")], &[])).await;
    let gpus = gpu_lines(&out);
    assert_eq!(gpus.len(), 1, "the MIG device's card: {out}");
    assert!(gpus[0].contains("A30"), "{out}");
    let migs = mig_lines(&out);
    assert_eq!(migs.len(), 1, "exactly its MIG device: {out}");
    assert!(migs[0].contains("MIG 2g.12gb"), "{out}");
    let visible = section(&out, "env")
        .into_iter()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_default()
        .to_owned();
    assert!(
        visible.starts_with("MIG-") && migs[0].contains(&visible),
        "{visible} vs {migs:?}"
    );
    let caps: Vec<&str> = section(&out, "device nodes")
        .into_iter()
        .filter(|n| {
            n.strip_prefix("nvidia-cap")
                .is_some_and(|minor| minor.parse::<u32>().is_ok())
        })
        .collect();
    assert_eq!(
        caps.len(),
        2,
        "the GPU and compute instance capability nodes only: {caps:?}"
    );
    assert_driver_libraries_found(&out);
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_container_without_a_claim_gets_no_gpu() {
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "no-claim").await;
    let out = run_to_end(&client, &ns, &workload_pod("none", SHOW_GPUS, &[], &[])).await;
    assert!(gpu_lines(&out).is_empty(), "{out}");
    assert!(section(&out, "device nodes").is_empty(), "{out}");
    assert!(section(&out, "ldconfig -p").is_empty(), "{out}");
    assert!(
        section(&out, "nvidia-smi -L").iter().any(|l| l.contains("not found")),
        "no nvidia-smi either: {out}"
    );
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn an_mps_share_gets_the_daemons_pipe_and_shared_memory() {
    let _cards = CARDS.lock().await;
    let (node, client) = node_with_example_classes().await;
    let ns = namespace(&client, "mps").await;
    mps_share_claim(&client, &node.name, &ns, "half", 50).await;
    let script = format!("{SHOW_GPUS}; echo '## mps'; ls -l /tmp/nvidia-mps; ls /dev/shm");
    let out = run_to_end(&client, &ns, &workload_pod("share", &script, &[("gpu", "half")], &[])).await;
    assert_eq!(gpu_lines(&out).len(), 1, "{out}");
    let env = section(&out, "env");
    assert!(env.contains(&"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"), "{env:?}");
    assert!(env.contains(&"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"), "{env:?}");
    let mps = section(&out, "mps").join("\n");
    assert!(
        mps.lines().any(|l| l.starts_with('p') && l.ends_with("control")),
        "the daemon's pipe: {mps}"
    );
    assert!(
        mps.contains("cuda.shm.mps-control."),
        "the daemon's shared memory in /dev/shm: {mps}"
    );
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_vfio_claim_gets_its_iommu_groups_node_and_no_nvidia_device() {
    let _cards = CARDS.lock().await;
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "vfio").await;
    claim(&client, &ns, "vm-gpu", "gpu-vfio", 1, None).await;
    let script = "ls /dev/vfio; ls /dev | grep -c '^nvidia'; cat /var/run/gpu.deckhouse.io/vfio/*.json";
    let out = run_to_end(&client, &ns, &workload_pod("vm", script, &[("gpu", "vm-gpu")], &[])).await;
    let payload: serde_json::Value = serde_json::from_str(
        out.lines()
            .skip_while(|l| !l.starts_with('{'))
            .collect::<Vec<_>>()
            .join("\n")
            .as_str(),
    )
    .unwrap_or_else(|e| panic!("payload: {e}: {out}"));
    let group = payload["devices"][0]["iommuGroup"].as_u64().unwrap();
    let listing: Vec<&str> = out.lines().take_while(|l| !l.starts_with('{')).collect();
    assert!(
        listing.contains(&group.to_string().as_str()),
        "/dev/vfio/{group}: {out}"
    );
    assert!(listing.contains(&"vfio"), "/dev/vfio/vfio: {out}");
    assert!(listing.contains(&"0"), "no NVIDIA device node: {out}");
    delete_namespace(&client, &ns).await;
}
