//! The MPS control daemon stand-in: `nvidia-cuda-mps-control -d` starts it in the background (`-f`
//! runs it in the foreground); it makes the named pipe `control` in `CUDA_MPS_PIPE_DIRECTORY` (default `/tmp/nvidia-mps`), logs to
//! `control.log` in `CUDA_MPS_LOG_DIRECTORY` (default `/var/log/nvidia-mps`), keeps a shared-memory
//! segment in `/dev/shm` as the real daemon does for its clients, and ends on `quit` (sent by
//! `nvidia-cuda-mps-control` with the command on its standard input).

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Mode, OFlags};

pub struct MpsDirs {
    pub pipe: PathBuf,
    pub log: PathBuf,
}

impl MpsDirs {
    pub fn from_env() -> Self {
        let dir = |key: &str, default: &str| PathBuf::from(std::env::var(key).unwrap_or_else(|_| default.into()));
        MpsDirs {
            pipe: dir("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"),
            log: dir("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"),
        }
    }

    fn control(&self) -> PathBuf {
        self.pipe.join("control")
    }

    fn log_line(&self, line: &str) {
        if let Ok(mut file) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log.join("control.log"))
        {
            let _ = writeln!(file, "{line}");
        }
    }
}

/// `-d`: starts `exe --daemon` in its own process group and returns once its pipe exists.
pub fn start_daemon(exe: &std::path::Path, dirs: &MpsDirs) -> Result<(), String> {
    Command::new(exe)
        .arg("--daemon")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the MPS control daemon: {e}"))?;
    let started = Instant::now();
    while !dirs.control().exists() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err(format!("the MPS control daemon made no {}", dirs.control().display()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The daemon itself.
pub fn run_daemon(dirs: &MpsDirs) -> Result<(), String> {
    fs::create_dir_all(&dirs.pipe).map_err(|e| format!("{}: {e}", dirs.pipe.display()))?;
    fs::create_dir_all(&dirs.log).map_err(|e| format!("{}: {e}", dirs.log.display()))?;
    let shm = PathBuf::from(format!("/dev/shm/cuda.shm.mps-control.{}", std::process::id()));
    fs::write(&shm, format!("MPS control daemon {}\n", std::process::id()))
        .map_err(|e| format!("{}: {e}", shm.display()))?;
    let control = dirs.control();
    let _ = fs::remove_file(&control);
    rustix::fs::mknodat(rustix::fs::CWD, &control, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
        .map_err(|e| format!("{}: {e}", control.display()))?;
    dirs.log_line(&format!("Control daemon started, pid {}", std::process::id()));
    // Read and write: the daemon holds a writer itself, so the pipe never reads end-of-file and never
    // has a moment without a reader. A client that keeps the pipe open for writing (its connection)
    // can write as long as this daemon lives, and gets EPIPE once it is gone: a daemon started again
    // makes a new pipe, and the old one has no reader left: a real client does not survive its server
    // either (CUDA Runtime API, `cudaErrorMpsClientTerminated`: "the process must be terminated and
    // relaunched"). `-f` is the real tool's foreground mode (nvidia-cuda-mps-control(1): `[-d | -f]`).
    let pipe = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&control)
        .map_err(|e| format!("{}: {e}", control.display()))?;
    for line in BufReader::new(pipe).lines() {
        let command = line.unwrap_or_default();
        dirs.log_line(&format!("Command: {command}"));
        if command.trim() == "quit" {
            break;
        }
    }
    let _ = fs::remove_file(&control);
    let _ = fs::remove_file(&shm);
    dirs.log_line("Control daemon exited");
    Ok(())
}

/// Client mode: each line of `commands` to the daemon; fails as the real tool does when none runs.
pub fn send(dirs: &MpsDirs, commands: &str) -> Result<(), String> {
    let no_daemon = || "Cannot find MPS control daemon process".to_owned();
    let mut pipe = OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(dirs.control())
        .map_err(|_| no_daemon())?;
    pipe.write_all(commands.as_bytes()).map_err(|_| no_daemon())
}
