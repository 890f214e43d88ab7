//! One MPS control daemon per card, run through the configured
//! `nvidia-cuda-mps-control`: `-d` starts it, `quit` on its standard input
//! stops it, both with `CUDA_VISIBLE_DEVICES=<card uuid>`,
//! `CUDA_MPS_PIPE_DIRECTORY=<plugin dir>/mps/<card>/pipe` and
//! `CUDA_MPS_LOG_DIRECTORY=<plugin dir>/mps/<card>/log`.
//!
//! The card's directory `<plugin dir>/mps/<card>` is the record that a daemon
//! may run: it is made before the start and removed after the stop, so
//! reconciliation finds a daemon that no recorded share needs any more. A
//! `quit` that fails does not keep the directory: the daemon is gone already
//! (a reboot, a crash after an earlier `quit`), and a daemon that somehow
//! survived makes the next start fail loudly instead of being reused.

use std::fs;

use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::host_tool::ToolRun;

/// Holds the card UUID the daemon was started for, so a stop after a crash uses the same environment.
const VISIBLE_DEVICES_FILE: &str = "visible-devices";

/// Starts the card's daemon unless its directory says one runs. Returns whether it started one.
pub(crate) fn start_mps_daemon(config: &NodePrepareConfig, card: &str, uuid: &str) -> Result<bool, PrepareError> {
    let dir = config.mps_dir(card);
    if dir.exists() {
        return Ok(false);
    }
    for made in [config.mps_pipe_dir(card), config.mps_log_dir(card), config.mps_shm_dir(card)] {
        fs::create_dir_all(&made).map_err(PrepareError::io("create directory", &made))?;
    }
    if config.mps_launcher.is_some() {
        let shm = config.mps_shm_dir(card);
        let mounted = crate::mps_namespace::mount_shm(&shm);
        if let Err(error) = mounted {
            let _ = fs::remove_dir_all(&dir);
            return Err(error);
        }
    }
    let uuid_file = dir.join(VISIBLE_DEVICES_FILE);
    let started = fs::write(&uuid_file, uuid)
        .map_err(PrepareError::io("write", &uuid_file))
        .and_then(|()| control(config, card, uuid, vec!["-d".into()], None, true).run(config.tool_timeout));
    if let Err(error) = started {
        crate::mps_namespace::unmount_shm(config, card);
        let _ = fs::remove_dir_all(&dir);
        return Err(error);
    }
    tracing::info!(%card, uuid, "started the card's MPS control daemon");
    Ok(true)
}

/// Stops the card's daemon if its directory says one may run and removes the
/// directory. Returns whether a daemon took the `quit`.
pub(crate) fn stop_mps_daemon(config: &NodePrepareConfig, card: &str) -> Result<bool, PrepareError> {
    let dir = config.mps_dir(card);
    if !dir.exists() {
        return Ok(false);
    }
    let uuid = fs::read_to_string(dir.join(VISIBLE_DEVICES_FILE)).unwrap_or_default();
    let stopped = match control(config, card, uuid.trim(), Vec::new(), Some("quit\n"), false).run(config.tool_timeout) {
        Ok(()) => {
            tracing::info!(%card, "stopped the card's MPS control daemon");
            true
        }
        Err(error) => {
            tracing::warn!(%card, %error, "the card's MPS control daemon did not take `quit`; taking it as gone");
            false
        }
    };
    crate::mps_namespace::unmount_shm(config, card);
    fs::remove_dir_all(&dir).map_err(PrepareError::io("remove", &dir))?;
    Ok(stopped)
}

/// The cards whose MPS directory exists (a daemon may run for them).
pub(crate) fn cards_with_daemon_dirs(config: &NodePrepareConfig) -> Vec<String> {
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
