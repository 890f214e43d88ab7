//! MPS clients outlive gpu-handler (issue 33): a card's MPS control daemon runs as a static Pod of
//! the node's kubelet, so a running client keeps its connection to it through
//! 1. a restart of gpu-handler's container (its process killed, as a crash or `crictl stop` ends it),
//! 2. a deletion of gpu-handler's Pod (the DaemonSet makes a new one),
//! 3. a module upgrade that changes gpu-handler's image (the next release's digest);
//!
//! and the daemon still goes with the card's last share: its manifest, mirror Pod, directory and
//! tmpfs. The client is the stand-in's: it keeps the daemon's control pipe open for writing, which
//! works while that daemon lives and fails with EPIPE once it is gone, even if another daemon has
//! made the pipe again since, as a CUDA client's context does not survive its daemon.

mod support;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use real_node::node::RealNode;
use serde_json::Value;
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

/// The stand-in MPS client: holds the daemon's control pipe open and writes to it every second.
const CLIENT: &str = "trap '' PIPE; exec 3>\"$CUDA_MPS_PIPE_DIRECTORY/control\" || exit 9; echo CONNECTED; \
    while echo \"client $(date +%s)\" >&3; do echo \"tick $(date +%s)\"; sleep 1; done; echo LOST; sleep 3600";

/// The one daemon's mirror Pod once the API server shows its container running: (uid, container id,
/// restart count, image). The kubelet writes the mirror Pod and its status after the static Pod
/// starts, so both are waited for.
async fn daemon_pod(client: &kube::Client) -> (String, String, i32, String) {
    wait_until(
        "the daemon's mirror Pod with its container running",
        POD_DONE,
        || async {
            let pods = module_pods(client, "gpu-mps").await;
            let seen = pods.iter().map(describe).collect::<Vec<_>>();
            let [pod] = &pods[..] else {
                return Ok(Progress::Pending(format!("{} mirror Pods: {seen:?}", pods.len())));
            };
            let statuses = container_statuses(pod);
            let running = statuses
                .first()
                .filter(|c| c.container_id.is_some() && c.state.as_ref().is_some_and(|s| s.running.is_some()));
            Ok(match running {
                Some(container) => Progress::Done((
                    pod.metadata.uid.clone().unwrap_or_default(),
                    container.container_id.clone().unwrap_or_default(),
                    container.restart_count,
                    image(pod),
                )),
                None => Progress::Pending(format!("{seen:?}")),
            })
        },
    )
    .await
    .unwrap()
}

/// Waits until the client ticked after `after`, and fails if it lost its daemon.
async fn client_still_connected(client: &kube::Client, ns: &str, after: u64, event: &str) {
    wait_until(&format!("the client ticks after {event}"), POD_DONE, || async {
        let log = match try_logs(client, ns, "client").await {
            Ok(log) => log,
            Err(error) => return Ok(Progress::Pending(format!("no log: {error}"))),
        };
        assert!(
            !log.contains("LOST"),
            "the client lost its MPS daemon through {event}: {log}"
        );
        let last = log
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("tick ")?.parse::<u64>().ok());
        Ok(match last {
            Some(time) if time > after => Progress::Done(()),
            other => Progress::Pending(format!("last tick {other:?}")),
        })
    })
    .await
    .unwrap();
}

fn container_statuses(pod: &Pod) -> Vec<ContainerStatus> {
    pod.status
        .clone()
        .unwrap_or_default()
        .container_statuses
        .unwrap_or_default()
}

fn restarts(pod: &Pod) -> i32 {
    container_statuses(pod)
        .iter()
        .find(|c| c.name == "gpu-handler")
        .map_or(0, |c| c.restart_count)
}

fn image(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers[0].image.clone())
        .unwrap_or_default()
}

/// How often the card's daemon started, from its log on the node.
fn daemon_starts(node: &RealNode, card: &str) -> usize {
    let log = node
        .files()
        .read_to_string(&format!("{MPS_DIR}/{card}/log/control.log"))
        .unwrap_or_default();
    log.matches("Control daemon started").count()
}

/// Points the module at gpu-handler's image of the next release (`upgrades` of images.json) or back
/// at the first: the test bed's operator renders the module again, as Deckhouse does for a release.
fn release_handler_image(node: &RealNode, next: bool) -> String {
    let path = node.dir.join("images.json");
    let mut images: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    if images["original"].is_null() {
        images["original"]["gpuHandler"] = images["digests"]["gpu"]["gpuHandler"].clone();
    }
    let release = if next { "upgrades" } else { "original" };
    let digest = images[release]["gpuHandler"]
        .as_str()
        .expect("a digest of gpu-handler")
        .to_owned();
    images["digests"]["gpu"]["gpuHandler"] = Value::from(digest.clone());
    let written = path.with_extension("json.next");
    std::fs::write(&written, serde_json::to_vec_pretty(&images).unwrap()).unwrap();
    std::fs::rename(&written, &path).unwrap();
    digest
}

#[tokio::test]
async fn an_mps_client_keeps_its_daemon_through_handler_restart_deletion_and_upgrade() {
    let _cards = CARDS.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    wait_no_mps_left(node, "before the client").await;
    let ns = namespace(&client, "mps-outlive").await;
    mps_share_claim(&client, &node.name, &ns, "share", 50).await;
    create_pod(&client, &ns, &workload_pod("client", CLIENT, &[("gpu", "share")], &[])).await;
    client_still_connected(&client, &ns, 0, "its start").await;
    let cards = node.files().list(MPS_DIR).unwrap();
    assert_eq!(cards.len(), 1, "one card's MPS directory: {cards:?}");
    let card = cards[0].clone();
    let manifests = node.files().list(STATIC_PODS).unwrap();
    assert!(
        manifests
            .iter()
            .any(|m| m.starts_with("gpu-mps-") && m.ends_with(".json")),
        "the daemon's static Pod in {STATIC_PODS}: {manifests:?}"
    );
    let daemon = daemon_pod(&client).await;
    let first_image = image(&handler_pod(&client).await);
    assert_eq!(daemon.3, first_image, "the daemon runs gpu-handler's image");
    assert_eq!(daemon_starts(node, &card), 1);

    // 1. gpu-handler's container ends (killed) and the kubelet starts it again.
    let before = restarts(&handler_pod(&client).await);
    let at = now();
    let killed = node.exec(&["pkill", "-KILL", "-x", "gpu-handler"]).unwrap();
    assert!(killed.status.success(), "gpu-handler's process killed: {killed:?}");
    handler_back(&client, "gpu-handler's container started again", |p| {
        restarts(p) > before
    })
    .await;
    client_still_connected(&client, &ns, at, "a restart of gpu-handler's container").await;

    // 2. gpu-handler's Pod deleted: the DaemonSet makes another.
    let at = delete_handler_pod(&client).await;
    client_still_connected(&client, &ns, at, "a deletion of gpu-handler's Pod").await;

    // 3. The next release changes gpu-handler's image.
    let next = release_handler_image(node, true);
    let at = now();
    handler_back(&client, "gpu-handler of the next release", |p| {
        image(p).ends_with(&next)
    })
    .await;
    client_still_connected(&client, &ns, at, "an upgrade of gpu-handler's image").await;

    // The same daemon throughout: one Pod, its container never restarted, one start in its log,
    // still of the image it was started with (a manifest is never rewritten under its clients).
    assert_eq!(
        daemon_pod(&client).await,
        daemon,
        "the daemon's Pod is the one started first"
    );
    assert_eq!(daemon_starts(node, &card), 1, "the daemon never started again");

    // The card's last share goes: so do the daemon's manifest, Pod, directory and tmpfs.
    delete_namespace(&client, &ns).await;
    wait_no_mps_left(node, "after the client").await;
    wait_until("the daemon's mirror Pod gone", POD_DONE, || async {
        let pods = module_pods(&client, "gpu-mps").await;
        Ok(if pods.is_empty() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{}", pods.len()))
        })
    })
    .await
    .unwrap();
    release_handler_image(node, false);
    handler_back(&client, "gpu-handler of the first release", |p| image(p) == first_image).await;
}
