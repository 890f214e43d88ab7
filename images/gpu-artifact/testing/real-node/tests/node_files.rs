//! The node's files as the node sees them. On a Debian machine `/var/run` is a symlink to `/run`, and
//! the kernel resolves it from the caller's root: `/proc/<node pid>/root/var/run/cdi` is the
//! machine's `/run/cdi`, not the node's. A decoy planted there shows that the tests' helper
//! (`RealNode::files`) reads the node's own directory, where gpu-handler wrote the claim's spec.

mod support;

use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use serde_json::json;
use support::module::wait_module_ready;
use support::*;

/// A file in the machine's `/run/cdi` (made if missing), removed with the directory it made.
struct Decoy {
    file: PathBuf,
    made_dir: bool,
}

impl Decoy {
    fn plant() -> Self {
        let dir = Path::new("/run/cdi");
        let made_dir = !dir.exists();
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join(format!("gpu.deckhouse.io-claim_decoy-{}.json", std::process::id()));
        std::fs::write(
            &file,
            r#"{"cdiVersion":"0.6.0","kind":"decoy.invalid/gpu","devices":[]}"#,
        )
        .unwrap();
        Decoy { file, made_dir }
    }

    fn name(&self) -> String {
        self.file.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for Decoy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        if self.made_dir {
            let _ = std::fs::remove_dir(self.file.parent().unwrap());
        }
    }
}

#[tokio::test]
async fn the_helper_reads_the_nodes_cdi_specs_not_a_decoy_on_the_machine() {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    let ns = namespace(&client, "node-files").await;
    claim(&client, &ns, "held", "h100", 1, None).await;
    let mut pod = workload_pod("held", "sleep 3600", &[("gpu", "held")], &[]);
    pod["spec"]["restartPolicy"] = json!("Always");
    create_pod(&client, &ns, &pod).await;
    wait_phase(&client, &ns, "held", "Running").await;
    let uid = Api::<ResourceClaim>::namespaced(client.clone(), &ns)
        .get("held")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let spec = format!("gpu.deckhouse.io-claim_{uid}.json");

    let decoy = Decoy::plant();
    let seen = node.files().list("/var/run/cdi").unwrap();
    assert!(
        seen.contains(&spec),
        "the node's /var/run/cdi holds the claim's spec {spec}: {seen:?}"
    );
    assert!(
        !seen.contains(&decoy.name()),
        "the machine's decoy is not the node's: {seen:?}"
    );
    let text = node.files().read_to_string(&format!("/var/run/cdi/{spec}")).unwrap();
    assert!(text.contains(&uid), "the spec names its claim: {text}");

    // What the old helper read: the joined path leaves the node through the absolute symlink.
    if std::fs::read_link("/var/run").is_ok_and(|target| target == Path::new("/run")) {
        let joined: Vec<String> = std::fs::read_dir(format!("/proc/{}/root/var/run/cdi", node.pid))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            joined.contains(&decoy.name()) && !joined.contains(&spec),
            "/proc/<pid>/root/var/run/cdi is the machine's /run/cdi: {joined:?}"
        );
    } else {
        println!("this machine's /var/run is no symlink to /run: the joined path cannot escape here");
    }
    drop(decoy);
    delete_namespace(&client, &ns).await;
}
