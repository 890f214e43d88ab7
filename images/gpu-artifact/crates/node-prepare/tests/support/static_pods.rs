//! The kubelet's part in running the MPS daemons' static Pods, for a fixture node: a thread that
//! reads the node's static Pod directory as the kubelet's file source does and runs each manifest's
//! container with the stand-in tool (`nvidia-cuda-mps-control -f` and the manifest's environment).
//! What it keeps of the kubelet: a manifest that appears is started at once; a manifest that goes,
//! or is replaced by another of a new content (another Pod UID), stops its container (SIGKILL, as
//! at the end of a grace period); a container that exits non-zero is started again
//! (`restartPolicy: OnFailure`), one that exits 0 (`quit`) stays down. The containers are the
//! thread's children, never the handler's: a killed handler leaves them running.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use node_prepare::MpsStaticPods;

use super::{Node, preparer_at};

/// The fixture's static Pod directory: a node has one when its kubelet runs static Pods.
pub const STATIC_POD_DIR: &str = "etc/kubernetes/manifests";

/// How often the directory is read (the kubelet watches it with inotify).
const POLL: Duration = Duration::from_millis(20);

/// A running static Pod: the manifest's text (its identity) and its container.
struct Running {
    manifest: String,
    container: Child,
}

/// Runs the static Pods of a fixture node until dropped.
pub struct StaticPodRunner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StaticPodRunner {
    /// Starts running the manifests of `dir` with the stand-in `mps_control`.
    pub fn start(dir: PathBuf, mps_control: PathBuf) -> StaticPodRunner {
        std::fs::create_dir_all(&dir).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut running: BTreeMap<String, Running> = BTreeMap::new();
            while !stopped.load(Ordering::Relaxed) {
                sync(&dir, &mps_control, &mut running);
                std::thread::sleep(POLL);
            }
            for (_, mut pod) in running {
                let _ = pod.container.kill();
                let _ = pod.container.wait();
            }
        });
        StaticPodRunner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StaticPodRunner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One pass of the kubelet's sync: start new manifests, stop gone or replaced ones, restart failed
/// containers.
fn sync(dir: &Path, mps_control: &Path, running: &mut BTreeMap<String, Running>) {
    let manifests: BTreeMap<String, String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let text = std::fs::read_to_string(e.path()).ok()?;
                    (!name.starts_with('.')).then_some((name, text))
                })
                .collect()
        })
        .unwrap_or_default();
    running.retain(|name, pod| {
        let keep = manifests.get(name) == Some(&pod.manifest);
        if !keep {
            let _ = pod.container.kill();
            let _ = pod.container.wait();
        }
        keep
    });
    for (name, manifest) in manifests {
        match running.get_mut(&name) {
            None => {
                if let Some(container) = start_container(&manifest, mps_control) {
                    running.insert(name, Running { manifest, container });
                }
            }
            Some(pod) => {
                let failed = matches!(pod.container.try_wait(), Ok(Some(status)) if !status.success());
                if failed && let Some(container) = start_container(&manifest, mps_control) {
                    pod.container = container;
                }
            }
        }
    }
}

/// The manifest's container: the stand-in tool with the arguments after the image's command path
/// and the manifest's environment.
fn start_container(manifest: &str, mps_control: &Path) -> Option<Child> {
    let pod: serde_json::Value = serde_json::from_str(manifest).ok()?;
    let container = &pod["spec"]["containers"][0];
    let args: Vec<String> = container["command"]
        .as_array()?
        .iter()
        .skip(1)
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let env: Vec<(String, String)> = container["env"]
        .as_array()?
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e["value"].as_str()?.to_owned())))
        .collect();
    Command::new(mps_control)
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// The static Pods of the node at `root`, when it has a static Pod directory.
pub fn config_of(root: &Path) -> Option<MpsStaticPods> {
    let dir = root.join(STATIC_POD_DIR);
    dir.is_dir().then(|| MpsStaticPods {
        dir,
        image: "registry.example/gpu-handler@sha256:0".to_owned(),
        namespace: "d8-gpu".to_owned(),
        driver_root: root.to_path_buf(),
        start_timeout: MpsStaticPods::DEFAULT_START_TIMEOUT,
    })
}

impl Node {
    /// The same node with a kubelet that runs static Pods: the MPS daemons run as static Pods.
    pub fn with_static_pods(mut self) -> Node {
        let dir = self.host.path(STATIC_POD_DIR);
        self.static_pods = Some(StaticPodRunner::start(dir, self.tools().mps_control()));
        self.preparer = preparer_at(self.host.root(), &self.mock.library_path());
        self
    }

    /// The manifests in the node's static Pod directory.
    pub fn static_pod_manifests(&self) -> Vec<String> {
        let dir = self.host.path(STATIC_POD_DIR);
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}
