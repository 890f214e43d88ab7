use std::path::Path;

use super::*;

const DIR: &str = "/var/lib/kubelet/plugins/gpu.deckhouse.io/mps/0000:18:00.0";

fn pod() -> Value {
    manifest(&MpsPod {
        card: "0000:18:00.0",
        uuid: "GPU-18b10080",
        image: "registry.example/gpu@sha256:0123",
        namespace: "d8-gpu",
        instance: "1764480000000000000",
        driver_root: Path::new("/run/nvidia/driver"),
        pipe_dir: Path::new(&format!("{DIR}/pipe")),
        log_dir: Path::new(&format!("{DIR}/log")),
        shm_dir: Path::new(&format!("{DIR}/shm")),
    })
}

/// `mountPath` of each volume mount, by the host path of its volume.
fn host_paths_by_mount(pod: &Value) -> Vec<(String, String)> {
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let mounts = pod["spec"]["containers"][0]["volumeMounts"].as_array().unwrap();
    mounts
        .iter()
        .map(|m| {
            let volume = volumes.iter().find(|v| v["name"] == m["name"]).unwrap();
            let host = volume["hostPath"]["path"].as_str().unwrap().to_owned();
            (host, m["mountPath"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn the_pod_is_named_for_its_card_as_a_dns_label() {
    assert_eq!(pod_name("0000:18:00.0"), "gpu-mps-0000-18-00-0");
    assert_eq!(manifest_file("0000:AB:00.0"), "gpu-mps-0000-ab-00-0.json");
    let pod = pod();
    assert_eq!(pod["metadata"]["name"], "gpu-mps-0000-18-00-0");
    assert_eq!(pod["metadata"]["namespace"], "d8-gpu");
}

#[test]
fn the_daemon_runs_in_the_foreground_for_its_card_only_and_the_kubelet_restarts_it_when_it_fails() {
    let pod = pod();
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        pod["spec"]["restartPolicy"], "OnFailure",
        "restarted when it fails, not after `quit`"
    );
    assert_eq!(
        pod["metadata"]["annotations"]["gpu.deckhouse.io/instance"],
        "1764480000000000000"
    );
    assert_eq!(container["command"], json!([MPS_CONTROL_IN_IMAGE, "-f"]));
    assert_eq!(container["image"], "registry.example/gpu@sha256:0123");
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        env.contains(&("CUDA_VISIBLE_DEVICES".into(), "GPU-18b10080".into())),
        "{env:?}"
    );
    assert!(
        env.contains(&("CUDA_MPS_PIPE_DIRECTORY".into(), format!("{DIR}/pipe"))),
        "{env:?}"
    );
    assert!(
        env.contains(&("CUDA_MPS_LOG_DIRECTORY".into(), format!("{DIR}/log"))),
        "{env:?}"
    );
}

#[test]
fn the_cards_directories_are_bound_where_the_daemon_and_its_clients_meet() {
    let bound = host_paths_by_mount(&pod());
    for expected in [
        // At the host's paths: driver-tool carries them into the driver root at the same path.
        (format!("{DIR}/pipe"), format!("{DIR}/pipe")),
        (format!("{DIR}/log"), format!("{DIR}/log")),
        (format!("{DIR}/shm"), "/dev/shm".to_owned()),
        ("/run/nvidia/driver".to_owned(), DRIVER_ROOT_IN_POD.to_owned()),
    ] {
        assert!(bound.contains(&expected), "{expected:?} in {bound:?}");
    }
    assert_eq!(bound.len(), 4, "nothing else of the host: {bound:?}");
}

#[test]
fn a_mirror_pod_can_be_made_of_it() {
    // The API server refuses a mirror Pod that uses a ServiceAccount token, a Secret or a ConfigMap.
    let pod = pod();
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    assert_eq!(pod["spec"]["hostNetwork"], true, "no dependence on the Pod network");
    assert_eq!(
        pod["spec"]["securityContext"]["runAsUser"], 0,
        "root, not the image's user"
    );
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().all(|v| v.get("hostPath").is_some()), "{volumes:?}");
}
