//! One MPS control daemon per card, run through the configured
//! `nvidia-cuda-mps-control`: `-d` starts it, `quit` on its standard input
//! stops it, `get_server_list` on its standard input answers only while it
//! runs; each with `CUDA_VISIBLE_DEVICES=<card uuid>`,
//! `CUDA_MPS_PIPE_DIRECTORY=<plugin dir>/mps/<card>/pipe` and
//! `CUDA_MPS_LOG_DIRECTORY=<plugin dir>/mps/<card>/log`, and a tmpfs of its own at
//! `<plugin dir>/mps/<card>/shm` for its and its clients' `/dev/shm` ([`crate::mps_shm`]).
//!
//! The card's directory `<plugin dir>/mps/<card>` says a daemon *should* run:
//! it is made before the start and removed after the stop. Whether one *does*
//! run is asked of the daemon itself (`get_server_list`), never read from the
//! directory: the daemon lives in the handler's container and dies with it, and
//! a leftover directory must not pass for a running daemon. Supervision
//! ([`supervise_mps_daemons`], at start and periodically) starts the daemon of
//! every card with a prepared MPS share again when it is gone, and stops the
//! daemons no share needs. A `quit` that fails does not keep the directory:
//! the daemon is gone already.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::SharingStrategy;

use crate::checkpoint::{CheckpointData, ClaimState};
use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::fault_point::fault_point;
use crate::host_tool::ToolRun;
use crate::mps_shm;
use crate::mps_static_pods;

/// Holds the card UUID the daemon was started for, so a stop after a crash uses the same environment.
const VISIBLE_DEVICES_FILE: &str = "visible-devices";

/// What supervision did for one card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MpsOutcome {
    /// The daemon a share needs answered.
    Running,
    /// The daemon a share needs was gone and was started again.
    Restarted,
    /// No share needs the card's daemon: stopped, its directory removed.
    Stopped,
}

/// Makes sure the card's daemon runs; returns whether this call started one (first start, or
/// again after it died).
pub(crate) fn start_mps_daemon(config: &NodePrepareConfig, card: &str, uuid: &str) -> Result<bool, PrepareError> {
    let dir = config.mps_dir(card);
    if dir.exists() && daemon_answers(config, card, uuid) {
        return Ok(false);
    }
    for made in [
        config.mps_pipe_dir(card),
        config.mps_log_dir(card),
        config.mps_shm_dir(card),
    ] {
        fs::create_dir_all(&made).map_err(PrepareError::io("create directory", &made))?;
    }
    let uuid_file = dir.join(VISIBLE_DEVICES_FILE);
    let started = fs::write(&uuid_file, uuid)
        .map_err(PrepareError::io("write", &uuid_file))
        .and_then(|()| match config.mps_shm_bytes {
            Some(size) => mps_shm::mount_shm(&config.mps_shm_dir(card), size),
            None => Ok(()),
        })
        .and_then(|()| launch(config, card, uuid));
    if let Err(error) = started {
        // A static Pod bound to the directory removed below would keep the stale binds: it goes too,
        // and the retry writes it afresh.
        if let Some(pods) = &config.mps_static_pods {
            let _ = mps_static_pods::remove_manifest(pods, card);
        }
        let _ = mps_shm::unmount_shm(&config.mps_shm_dir(card));
        let _ = fs::remove_dir_all(&dir);
        return Err(error);
    }
    tracing::info!(%card, uuid, "started the card's MPS control daemon");
    Ok(true)
}

/// Starts the card's daemon: as the handler's child (`-d`), or as a static Pod of the kubelet,
/// ready once it answers on its pipe.
fn launch(config: &NodePrepareConfig, card: &str, uuid: &str) -> Result<(), PrepareError> {
    match &config.mps_static_pods {
        None => control(config, card, uuid, vec!["-d".into()], None, true).run(config.tool_timeout),
        Some(pods) => {
            mps_static_pods::ensure_manifest(config, pods, card, uuid)?;
            // The kubelet may run the daemon already; the prepare has not seen it answer.
            fault_point("prepare/inside/apply-sharing/mps-static-pod-written")?;
            mps_static_pods::wait_until_answers(card, pods.start_timeout, || daemon_answers(config, card, uuid))
        }
    }
}

/// Stops the card's daemon if its directory says one may run, unmounts its shared memory and
/// removes the directory. Returns whether a daemon took the `quit`.
pub(crate) fn stop_mps_daemon(config: &NodePrepareConfig, card: &str) -> Result<bool, PrepareError> {
    let dir = config.mps_dir(card);
    if !dir.exists() {
        return Ok(false);
    }
    let uuid = recorded_uuid(config, card);
    let stopped = match control(config, card, &uuid, Vec::new(), Some("quit\n"), false).run(config.tool_timeout) {
        Ok(()) => {
            tracing::info!(%card, "stopped the card's MPS control daemon");
            true
        }
        Err(error) => {
            tracing::warn!(%card, %error, "the card's MPS control daemon did not take `quit`; taking it as gone");
            false
        }
    };
    // The kubelet removes a static Pod whose manifest goes; a daemon that took `quit` has exited 0
    // and stays down meanwhile (`restartPolicy: OnFailure`).
    if let Some(pods) = &config.mps_static_pods {
        mps_static_pods::remove_manifest(pods, card)?;
    }
    // The shared memory goes with the daemon; a failed unmount keeps the directory (and the
    // claim), so the unprepare is retried rather than leaving segments for a later tenant.
    mps_shm::unmount_shm(&config.mps_shm_dir(card))?;
    fs::remove_dir_all(&dir).map_err(PrepareError::io("remove", &dir))?;
    Ok(stopped)
}

/// Whether the card's daemon answers `get_server_list` (a dead daemon leaves nobody to answer).
fn daemon_answers(config: &NodePrepareConfig, card: &str, uuid: &str) -> bool {
    control(config, card, uuid, Vec::new(), Some("get_server_list\n"), false)
        .run(config.tool_timeout)
        .is_ok()
}

fn recorded_uuid(config: &NodePrepareConfig, card: &str) -> String {
    let path = config.mps_dir(card).join(VISIBLE_DEVICES_FILE);
    fs::read_to_string(path).unwrap_or_default().trim().to_owned()
}

/// Brings every card's daemon in line with the checkpoint: a card with a prepared MPS share has
/// one that answers, a card without has none. Cards with a share still `PrepareStarted` are left
/// to the rollback of that claim.
pub(crate) fn supervise_mps_daemons(
    config: &NodePrepareConfig,
    data: &CheckpointData,
) -> Vec<(String, Result<MpsOutcome, PrepareError>)> {
    let mut needed = BTreeMap::new();
    let mut in_flight = BTreeSet::new();
    for claim in data.claims.values() {
        for device in &claim.devices {
            let (Some(sharing), OfferedDevice::SharedPhysical { pci_address, uuid, .. }) =
                (&device.sharing, &device.target)
            else {
                continue;
            };
            if sharing.strategy != SharingStrategy::Mps {
                continue;
            }
            match claim.state {
                ClaimState::PrepareCompleted => {
                    needed.insert(pci_address.to_string(), uuid.clone());
                }
                ClaimState::PrepareStarted => {
                    in_flight.insert(pci_address.to_string());
                }
            }
        }
    }
    let mut outcomes = Vec::new();
    for (card, uuid) in &needed {
        let outcome = if config.mps_dir(card).exists() && daemon_answers(config, card, uuid) {
            Ok(MpsOutcome::Running)
        } else {
            tracing::warn!(%card, "the MPS control daemon of a card with prepared MPS shares is not running; starting it again");
            start_mps_daemon(config, card, uuid).map(|_| MpsOutcome::Restarted)
        };
        outcomes.push((card.clone(), outcome));
    }
    let with_dirs = cards_with_daemon_dirs(config);
    for card in &with_dirs {
        if needed.contains_key(card) || in_flight.contains(card) {
            continue;
        }
        let outcome = stop_mps_daemon(config, card).map(|_| MpsOutcome::Stopped);
        outcomes.push((card.clone(), outcome));
    }
    if let Some(pods) = &config.mps_static_pods {
        // A crash between a directory's removal and its manifest's, or a manifest left by hand.
        // Read again: the stops above removed their cards' directories and manifests.
        let kept: Vec<String> = cards_with_daemon_dirs(config);
        for (manifest, removed) in mps_static_pods::remove_orphans(pods, &kept) {
            outcomes.push((manifest, removed.map(|()| MpsOutcome::Stopped)));
        }
    }
    outcomes
}

/// The cards whose MPS directory exists (a daemon should run for them).
fn cards_with_daemon_dirs(config: &NodePrepareConfig) -> Vec<String> {
    let Ok(entries) = fs::read_dir(config.plugin_dir.join("mps")) else {
        return Vec::new();
    };
    let mut cards: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    cards.sort();
    cards
}

fn control<'a>(
    config: &'a NodePrepareConfig,
    card: &str,
    uuid: &str,
    args: Vec<String>,
    stdin: Option<&'static str>,
    starts_daemon: bool,
) -> ToolRun<'a> {
    let (program, args) = match &config.mps_launcher {
        Some(launcher) => {
            let mut wrapped = vec![
                crate::mps_namespace::MPS_NAMESPACE_COMMAND.to_owned(),
                config.mps_shm_dir(card).display().to_string(),
                "--".to_owned(),
                config.mps_control.display().to_string(),
            ];
            wrapped.extend(args);
            (launcher.as_path(), wrapped)
        }
        None => (config.mps_control.as_path(), args),
    };
    ToolRun {
        program,
        args,
        env: vec![
            ("CUDA_VISIBLE_DEVICES", uuid.to_owned()),
            (
                "CUDA_MPS_PIPE_DIRECTORY",
                config.mps_pipe_dir(card).display().to_string(),
            ),
            ("CUDA_MPS_LOG_DIRECTORY", config.mps_log_dir(card).display().to_string()),
        ],
        stdin,
        starts_daemon,
    }
}
