//! Runs one of the module's binaries as a real process for a test: built once per test process,
//! logging to a file, killed when the handle drops.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::ReservedPort;

static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The path of workspace binary `name`, built (incrementally, in the test's own profile, or in the
/// shipped `image` profile for a benchmark) the first time a test asks for it.
pub fn component_binary(name: &str) -> anyhow::Result<PathBuf> {
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let built = built.get_or_insert_with(HashSet::new);
    // Test binaries live in <target>/debug/deps; the component lands in <target>/debug.
    let exe = std::env::current_exe()?;
    let debug_dir = exe.parent().and_then(Path::parent).context("test binary location")?;
    // A benchmark (release) runs the components as the images ship them (the `image` profile).
    let release = debug_dir.file_name().is_some_and(|d| d == "release");
    let component_dir = if release {
        debug_dir.with_file_name("image")
    } else {
        debug_dir.to_path_buf()
    };
    if built.insert(name.to_owned()) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let target = debug_dir.parent().context("target dir")?;
        let mut args = vec!["build", "--quiet", "-p", name];
        if release {
            args.extend(["--profile", "image"]);
        }
        let status = Command::new(cargo)
            .args(args)
            .current_dir(workspace)
            .env("CARGO_TARGET_DIR", target)
            .status()?;
        if !status.success() {
            bail!("cargo build -p {name} failed");
        }
    }
    Ok(component_dir.join(name))
}

/// A running component. Dropping it kills the process.
pub struct ComponentProcess {
    name: String,
    child: Child,
    log: PathBuf,
    /// Ports the process was told to listen on, held for its lifetime so no one else takes them.
    ports: Vec<ReservedPort>,
}

impl ComponentProcess {
    /// Starts binary `name` with exactly `env` (plus PATH), its output in `<log_dir>/<name>-<n>.log`.
    pub fn start(name: &str, env: &[(&str, String)], log_dir: &Path) -> anyhow::Result<Self> {
        let binary = component_binary(name)?;
        Self::start_program(name, &binary, &[], env, log_dir)
    }

    /// Starts `program` with `args` and exactly `env` (plus PATH), under the name `name` (its log
    /// is `<log_dir>/<name>-<n>.log`): another actor a test runs beside ours, such as Kueue.
    pub fn start_program(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let binary = program;
        std::fs::create_dir_all(log_dir)?;
        let mut n = 0;
        let log = loop {
            let candidate = log_dir.join(format!("{name}-{n}.log"));
            if !candidate.exists() {
                break candidate;
            }
            n += 1;
        };
        let out = std::fs::File::create(&log)?;
        let child = Command::new(binary)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
            ports: Vec::new(),
        })
    }

    /// Keeps `port` reserved for as long as this process handle lives.
    pub fn holding(mut self, port: ReservedPort) -> Self {
        self.ports.push(port);
        self
    }

    /// Everything the process has logged so far. The file is made before the process starts, so a
    /// read that fails is a fault of the bed, never an empty log (a check that the log lacks a line
    /// would pass on it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log)
            .unwrap_or_else(|error| panic!("read the log {} of {}: {error}", self.log.display(), self.name))
    }

    /// Whether the process is still running (a crash loop would show up here).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits up to `grace` for a clean exit; returns the exit code if it exited.
    pub fn terminate(&mut self, grace: Duration) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        None
    }

    /// SIGKILL, as a crash or the OOM killer would: no handler runs, nothing is flushed. Waits for
    /// the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Resident memory of the process in KiB (VmRSS), for benchmarks.
    pub fn rss_kib(&self) -> Option<u64> {
        self.status_kib("VmRSS:")
    }

    /// Of the resident memory, the anonymous part in KiB (RssAnon: the heap and stacks), for
    /// benchmarks; the rest is mostly the binary's own pages (RssFile).
    pub fn rss_anon_kib(&self) -> Option<u64> {
        self.status_kib("RssAnon:")
    }

    /// The most resident memory the process has had in KiB (VmHWM), for benchmarks.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for ComponentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
