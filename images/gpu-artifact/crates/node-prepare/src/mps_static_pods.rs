//! The daemons' static Pods on the node (see `mps_static_pod` for what one says): written when a
//! card's daemon is started and none is there, never rewritten while it is (a daemon of an older
//! image stays until the card's last share goes), removed when the daemon is stopped, and the
//! manifests of cards without a daemon directory removed by supervision (a crash between the steps).

use std::fs;
use std::time::{Duration, Instant};

use crate::atomic_file::{remove_durably, write_atomically};
use crate::config::{MpsStaticPods, NodePrepareConfig};
use crate::error::PrepareError;
use crate::mps_static_pod::{MpsPod, manifest, manifest_file};

/// How often a start asks whether the kubelet's Pod runs the daemon yet.
const POLL: Duration = Duration::from_millis(200);

/// Writes the manifest of `card`'s daemon unless one is there; returns whether it wrote one.
pub(crate) fn ensure_manifest(
    config: &NodePrepareConfig,
    pods: &MpsStaticPods,
    card: &str,
    uuid: &str,
) -> Result<bool, PrepareError> {
    let path = pods.dir.join(manifest_file(card));
    if path.exists() {
        return Ok(false);
    }
    let instance = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        .to_string();
    let pod = manifest(&MpsPod {
        card,
        uuid,
        image: &pods.image,
        namespace: &pods.namespace,
        instance: &instance,
        driver_root: &pods.driver_root,
        pipe_dir: &config.mps_pipe_dir(card),
        log_dir: &config.mps_log_dir(card),
        shm_dir: &config.mps_shm_dir(card),
    });
    // A `Value` of strings and objects only: serialising it cannot fail.
    let text = serde_json::to_vec_pretty(&pod).unwrap_or_default();
    write_atomically(&path, &text)?;
    tracing::info!(%card, manifest = %path.display(), "wrote the static Pod of the card's MPS control daemon");
    Ok(true)
}

/// Removes the manifest of `card`'s daemon, if any (the kubelet then stops its Pod).
pub(crate) fn remove_manifest(pods: &MpsStaticPods, card: &str) -> Result<(), PrepareError> {
    let path = pods.dir.join(manifest_file(card));
    if !path.exists() {
        return Ok(());
    }
    remove_durably(&path)
}

/// Removes the manifests of daemons whose card is not in `cards` (no daemon directory).
pub(crate) fn remove_orphans(pods: &MpsStaticPods, cards: &[String]) -> Vec<(String, Result<(), PrepareError>)> {
    let wanted: Vec<String> = cards.iter().map(|c| manifest_file(c)).collect();
    let Ok(entries) = fs::read_dir(&pods.dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("gpu-mps-") && name.ends_with(".json") && !wanted.contains(&name) {
            removed.push((name, remove_durably(&entry.path())));
        }
    }
    removed
}

/// Waits, up to `bound` (`MpsStaticPods::start_timeout`), until `answers` says the daemon answers on
/// its pipe.
pub(crate) fn wait_until_answers(card: &str, bound: Duration, answers: impl Fn() -> bool) -> Result<(), PrepareError> {
    let started = Instant::now();
    loop {
        if answers() {
            return Ok(());
        }
        if started.elapsed() >= bound {
            return Err(PrepareError::Tool {
                command: "nvidia-cuda-mps-control get_server_list".to_owned(),
                reason: format!(
                    "the static Pod of card {card}'s MPS control daemon did not answer within {bound:?}; \
                     the kubelet may not run it yet (its staticPodPath, the image)"
                ),
            });
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
#[path = "mps_static_pods_tests.rs"]
mod tests;
