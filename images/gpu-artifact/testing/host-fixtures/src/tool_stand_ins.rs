//! Stand-ins for the NVIDIA driver's command-line tools the node calls for shared cards, written
//! into a fixture host. They do nothing but record what they were asked: `nvidia-smi` logs its
//! arguments; `nvidia-cuda-mps-control -d` logs its environment and leaves a marker per card,
//! `quit` on its input logs and removes the marker (failing, as the real one does, when no daemon
//! runs).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::HostTree;

/// Where the stand-ins live in the fixture host.
pub const STAND_INS_DIR: &str = "opt/stand-ins";

/// The installed stand-ins of one fixture host.
pub struct ToolStandIns {
    dir: PathBuf,
}

impl ToolStandIns {
    /// The stand-ins already installed in `host`.
    pub fn at(host: &HostTree) -> ToolStandIns {
        ToolStandIns {
            dir: host.path(STAND_INS_DIR),
        }
    }

    pub fn install(host: &HostTree) -> ToolStandIns {
        let dir = host.path(STAND_INS_DIR);
        let log = dir.join("tools.log");
        let smi = format!("#!/bin/sh\necho \"nvidia-smi $*\" >> '{}'\n", log.display());
        let mps = format!(
            r#"#!/bin/sh
log='{log}'
marker="{dir}/mps-daemon-$CUDA_VISIBLE_DEVICES.running"
env="CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY"
if [ "$1" = "-d" ]; then
  echo "nvidia-cuda-mps-control -d $env" >> "$log"
  touch "$marker"
  exit 0
fi
read command
echo "nvidia-cuda-mps-control <<< $command $env" >> "$log"
[ -e "$marker" ] || {{ echo "Cannot find MPS control daemon process" >&2; exit 1; }}
rm "$marker"
"#,
            log = log.display(),
            dir = dir.display()
        );
        for (name, script) in [("nvidia-smi", smi), ("nvidia-cuda-mps-control", mps)] {
            host.write_file(format!("{STAND_INS_DIR}/{name}"), script);
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        ToolStandIns { dir }
    }

    pub fn nvidia_smi(&self) -> PathBuf {
        self.dir.join("nvidia-smi")
    }

    pub fn mps_control(&self) -> PathBuf {
        self.dir.join("nvidia-cuda-mps-control")
    }

    /// What the stand-ins were asked, one line per call.
    pub fn calls(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.join("tools.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }

    /// Whether the stand-in MPS daemon for the card `uuid` runs.
    pub fn mps_daemon_running(&self, uuid: &str) -> bool {
        self.dir.join(format!("mps-daemon-{uuid}.running")).exists()
    }
}
