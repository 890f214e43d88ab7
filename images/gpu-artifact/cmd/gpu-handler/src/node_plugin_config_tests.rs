use std::collections::HashMap;

use super::*;

fn config(pairs: &[(&str, &str)]) -> anyhow::Result<NodePluginConfig> {
    let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    NodePluginConfig::from_lookup(|key| env.get(key).cloned())
}

#[test]
fn production_defaults_and_paths_follow_the_kubelet_root() {
    let c = config(&[]).unwrap();
    assert!(c.mig_offers);
    let prepare = c.prepare("w1", None, None);
    assert_eq!(
        prepare.plugin_dir,
        PathBuf::from("/var/lib/kubelet/plugins/gpu.deckhouse.io")
    );
    assert_eq!(prepare.cdi_dir, PathBuf::from("/var/run/cdi"));
    assert_eq!(prepare.nvidia_smi, PathBuf::from("nvidia-smi"));
    assert_eq!(prepare.mps_control, PathBuf::from("nvidia-cuda-mps-control"));
    let moved = config(&[
        ("KUBELET_ROOT", "/t/kubelet"),
        ("HOST_ROOT", "/t"),
        ("MIG_OFFERS", "false"),
        ("NVIDIA_SMI", "/driver/usr/bin/nvidia-smi"),
        ("NVIDIA_MPS_CONTROL", "/driver/usr/bin/nvidia-cuda-mps-control"),
    ])
    .unwrap();
    assert_eq!(
        moved.prepare("w1", None, None).nvidia_smi,
        PathBuf::from("/driver/usr/bin/nvidia-smi")
    );
    assert_eq!(
        moved.prepare("w1", None, None).mps_control,
        PathBuf::from("/driver/usr/bin/nvidia-cuda-mps-control")
    );
    assert_eq!(
        moved.prepare("w1", None, None).plugin_dir,
        PathBuf::from("/t/kubelet/plugins/gpu.deckhouse.io")
    );
    assert_eq!(moved.prepare("w1", None, None).host_root, PathBuf::from("/t"));
    assert!(!moved.mig_offers);
}

#[test]
fn the_mps_shared_memory_is_a_tmpfs_of_the_set_size_only_where_daemons_get_a_namespace() {
    let simulated = config(&[]).unwrap();
    assert_eq!(
        simulated
            .prepare("w1", None, Some("/app/gpu-handler".into()))
            .mps_shm_bytes,
        None
    );
    let real = config(&[("MPS_SHM_NAMESPACE", "true")]).unwrap();
    assert_eq!(real.prepare("w1", None, None).mps_shm_bytes, Some(1 << 30));
    let sized = config(&[("MPS_SHM_NAMESPACE", "true"), ("MPS_SHM_SIZE", "64Mi")]).unwrap();
    assert_eq!(sized.prepare("w1", None, None).mps_shm_bytes, Some(64 << 20));
    for bad in ["0", "1G", "lots"] {
        let error = config(&[("MPS_SHM_SIZE", bad)]).unwrap_err().to_string();
        assert!(error.contains("MPS_SHM_SIZE") && error.contains(bad), "{error}");
    }
}

#[test]
fn a_bad_switch_names_the_variable() {
    let error = config(&[("MIG_OFFERS", "yes")]).unwrap_err().to_string();
    assert!(error.contains("MIG_OFFERS") && error.contains("\"yes\""), "{error}");
}

#[test]
fn mps_static_pods_need_their_image_namespace_and_the_driver_root() {
    let root = [
        ("DRIVER_ROOT_CTR_PATH", "/driver-root"),
        ("DRIVER_ROOT", "/run/nvidia/driver"),
    ];
    assert_eq!(config(&root).unwrap().prepare("w1", None, None).mps_static_pods, None);
    let mut full = root.to_vec();
    full.extend([
        ("MPS_STATIC_POD_DIR", "/etc/kubernetes/manifests"),
        ("MPS_DAEMON_IMAGE", "registry.example/gpu@sha256:1"),
        ("POD_NAMESPACE", "d8-gpu"),
    ]);
    assert_eq!(
        config(&full).unwrap().prepare("w1", None, None).mps_static_pods,
        Some(MpsStaticPods {
            dir: "/etc/kubernetes/manifests".into(),
            image: "registry.example/gpu@sha256:1".into(),
            namespace: "d8-gpu".into(),
            driver_root: "/run/nvidia/driver".into(),
            start_timeout: MpsStaticPods::DEFAULT_START_TIMEOUT,
        })
    );
    let no_image: Vec<_> = full.iter().copied().filter(|(k, _)| *k != "MPS_DAEMON_IMAGE").collect();
    let error = config(&no_image).unwrap_err().to_string();
    assert!(error.contains("MPS_DAEMON_IMAGE"), "{error}");
    let no_root = [("MPS_STATIC_POD_DIR", "/etc/kubernetes/manifests")];
    let error = config(&no_root).unwrap_err().to_string();
    assert!(error.contains("DRIVER_ROOT"), "{error}");
}
