use std::path::Path;

use super::*;

fn setup(root: &Path) -> (NodePrepareConfig, MpsStaticPods) {
    let config = NodePrepareConfig::new("n1", root);
    let pods = MpsStaticPods {
        dir: root.join("etc/kubernetes/manifests"),
        image: "registry.example/gpu@sha256:1".to_owned(),
        namespace: "d8-gpu".to_owned(),
        driver_root: root.join("driver"),
        start_timeout: MpsStaticPods::DEFAULT_START_TIMEOUT,
    };
    fs::create_dir_all(&pods.dir).unwrap();
    (config, pods)
}

fn image_of(pods: &MpsStaticPods, card: &str) -> String {
    let text = fs::read_to_string(pods.dir.join(manifest_file(card))).unwrap();
    let pod: serde_json::Value = serde_json::from_str(&text).unwrap();
    pod["spec"]["containers"][0]["image"].as_str().unwrap().to_owned()
}

#[test]
fn a_manifest_is_written_once_and_never_rewritten_while_it_is_there() {
    let root = tempfile::tempdir().unwrap();
    let (config, mut pods) = setup(root.path());
    assert!(ensure_manifest(&config, &pods, "0000:18:00.0", "GPU-1").unwrap());
    pods.image = "registry.example/gpu@sha256:2".to_owned();
    assert!(!ensure_manifest(&config, &pods, "0000:18:00.0", "GPU-1").unwrap());
    assert_eq!(
        image_of(&pods, "0000:18:00.0"),
        "registry.example/gpu@sha256:1",
        "an upgrade leaves the running daemon's Pod alone"
    );
    remove_manifest(&pods, "0000:18:00.0").unwrap();
    assert!(ensure_manifest(&config, &pods, "0000:18:00.0", "GPU-1").unwrap());
    assert_eq!(
        image_of(&pods, "0000:18:00.0"),
        "registry.example/gpu@sha256:2",
        "the next first share"
    );
}

#[test]
fn supervision_removes_only_the_manifests_of_cards_without_a_daemon_directory() {
    let root = tempfile::tempdir().unwrap();
    let (config, pods) = setup(root.path());
    for card in ["0000:18:00.0", "0000:2a:00.0"] {
        ensure_manifest(&config, &pods, card, "GPU").unwrap();
    }
    fs::write(pods.dir.join("kube-proxy.yaml"), "not ours").unwrap();
    let removed = remove_orphans(&pods, &["0000:18:00.0".to_owned()]);
    let names: Vec<&str> = removed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["gpu-mps-0000-2a-00-0.json"]);
    let mut left: Vec<String> = fs::read_dir(&pods.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["gpu-mps-0000-18-00-0.json", "kube-proxy.yaml"]);
}

#[test]
fn a_daemon_that_never_answers_is_an_error_that_says_where_to_look() {
    let error = wait_until_answers("0000:18:00.0", Duration::from_millis(300), || false).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("0000:18:00.0") && text.contains("staticPodPath"),
        "{text}"
    );
    wait_until_answers("0000:18:00.0", Duration::from_millis(300), || true).unwrap();
}
