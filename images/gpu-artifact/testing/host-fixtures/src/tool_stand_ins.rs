//! Stand-ins for the NVIDIA driver's command-line tools the node calls for shared cards, written
//! into a fixture host. They record what they were asked and keep the state a test looks at:
//! `nvidia-smi compute-policy -i <uuid> --set-timeslice <n>` logs its arguments and keeps the card's
//! time slice in `timeslice-<uuid>`; `nvidia-cuda-mps-control -d` logs its environment and starts a
//! real background process per card (its pid in the card's marker file), `-f` is that process in
//! the foreground (a static Pod's container, which exits 0 on `quit`), which `quit` on the
//! tool's input stops; `get_server_list` answers only while that process lives. Both fail, as the
//! real tool does, when no daemon runs. A test kills a daemon for real with [`ToolStandIns::kill_mps_daemon`].

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
        let smi = format!(
            r#"#!/bin/sh
echo "nvidia-smi $*" >> '{log}'
if [ "$1" = compute-policy ] && [ "$2" = -i ] && [ "$4" = --set-timeslice ]; then
  echo "$5" > '{dir}'/timeslice-"$3"
fi
"#,
            log = log.display(),
            dir = dir.display()
        );
        // The daemon is a shell loop that lives while its marker does (so a removed fixture takes
        // it along); its pid is the marker's content.
        let mps = format!(
            r#"#!/bin/sh
log='{log}'
marker="{dir}/mps-daemon-$CUDA_VISIBLE_DEVICES.running"
env="CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY"
alive() {{
  pid=$(cat "$marker" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r /proc/$pid/stat ] || return 1
  state=$(sed 's/.*) //' /proc/$pid/stat | cut -c1)
  [ "$state" != Z ]
}}
if [ "$1" = "-d" ]; then
  echo "nvidia-cuda-mps-control -d $env" >> "$log"
  if alive; then echo "An instance of this daemon is already running" >&2; exit 1; fi
  : > "$marker"
  (while [ -e "$marker" ]; do sleep 1; done) </dev/null >/dev/null 2>&1 &
  echo $! > "$marker"
  exit 0
fi
if [ "$1" = "-f" ]; then
  echo "nvidia-cuda-mps-control -f $env" >> "$log"
  if alive; then echo "An instance of this daemon is already running" >&2; exit 1; fi
  echo $$ > "$marker"
  trap 'exit 0' TERM
  while [ -e "$marker" ]; do sleep 1; done
  exit 0
fi
read command
if [ "$command" = get_server_list ]; then
  alive || {{ echo "Cannot find MPS control daemon process" >&2; exit 1; }}
  exit 0
fi
echo "nvidia-cuda-mps-control <<< $command $env" >> "$log"
alive || {{ rm -f "$marker"; echo "Cannot find MPS control daemon process" >&2; exit 1; }}
kill "$(cat "$marker")"
rm -f "$marker"
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
        // The stand-ins make the log with their first call: no file is no call.
        let path = self.dir.join("tools.log");
        match std::fs::read_to_string(&path) {
            Ok(log) => log.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    /// The pid of the stand-in MPS daemon of the card `uuid`, while its process lives.
    pub fn mps_daemon_pid(&self, uuid: &str) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join(format!("mps-daemon-{uuid}.running"))).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        (state != Some('Z')).then_some(pid)
    }

    /// Whether the stand-in MPS daemon for the card `uuid` runs.
    pub fn mps_daemon_running(&self, uuid: &str) -> bool {
        self.mps_daemon_pid(uuid).is_some()
    }

    /// Kills the card's daemon process with SIGKILL, as a crash would; its marker stays behind.
    /// Returns the pid it killed, once the process is dead (a signal is delivered asynchronously:
    /// `kill` returns before the process ends). Panics if it is still alive after 10 s.
    pub fn kill_mps_daemon(&self, uuid: &str) -> Option<u32> {
        let pid = self.mps_daemon_pid(uuid)?;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .is_ok_and(|status| status.success());
        if !killed {
            return None;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.mps_daemon_pid(uuid) == Some(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "the MPS daemon {pid} of {uuid} still runs 10 s after SIGKILL"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Some(pid)
    }

    /// The time slice (`0`..`3`) last set on the card `uuid`, if one was ever set.
    pub fn time_slice(&self, uuid: &str) -> Option<u8> {
        let text = std::fs::read_to_string(self.dir.join(format!("timeslice-{uuid}"))).ok()?;
        text.trim().parse().ok()
    }
}
