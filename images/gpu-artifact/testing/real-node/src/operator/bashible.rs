//! What bashible does with the module's NodeGroupConfigurations on the real node, which no bashible
//! runs: each step the chart renders is rendered again with the node's bashible context (its NodeGroup
//! and CRI) and run by bash, in weight order, whenever its content changes, as bashible reruns the
//! steps of a changed bundle. The script runs on the machine against the node's files: every host path
//! a step of the module touches is moved under the fixture host (the node sees its /sys and NVIDIA's
//! toolkit configuration there); bashible's own commands are stand-ins that record what they are asked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use testbed::bashible;

/// The host paths the module's steps touch (templates/node-configuration).
const HOST_PATHS: [&str; 4] = [
    "/sys/bus/pci/devices",
    "/etc/containerd/",
    "/etc/nvidia-container-runtime/",
    "/etc/kubernetes/",
];

/// The real node as bashible sees it: a node of the system NodeGroup, containerd 2.
pub fn node_context() -> Value {
    json!({"cri": "ContainerdV2", "nodeGroup": {"name": "system"}})
}

pub struct Bashible {
    pub helm: PathBuf,
    /// The fixture host: the node's `/`.
    pub host: PathBuf,
    /// The content of each step as it last ran.
    ran: BTreeMap<String, String>,
}

impl Bashible {
    pub fn new(helm: PathBuf, host: PathBuf) -> Self {
        Self {
            helm,
            host,
            ran: BTreeMap::new(),
        }
    }

    /// Runs every NodeGroupConfiguration of `objects` whose content changed since it last ran; the names
    /// of the steps that ran.
    pub fn converge(&mut self, objects: &[Value]) -> anyhow::Result<Vec<String>> {
        let mut steps: Vec<(i64, String, String)> = objects
            .iter()
            .filter(|o| o["kind"] == "NodeGroupConfiguration")
            .map(|o| {
                (
                    o["spec"]["weight"].as_i64().unwrap_or(100),
                    o["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                    o["spec"]["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        steps.sort();
        let mut ran = Vec::new();
        for (_, name, content) in steps {
            if self.ran.get(&name) == Some(&content) {
                continue;
            }
            let script = bashible::render(&self.helm, &content, &node_context())?;
            self.run(&name, &script)?;
            self.ran.insert(name.clone(), content);
            ran.push(name);
        }
        Ok(ran)
    }

    fn run(&self, name: &str, script: &str) -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("real-node-bashible-{}", std::process::id()));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin)?;
        for (command, body) in [
            ("bb-d8-node-name", "echo realnode"),
            ("bb-log-error", "echo \"$@\" >&2"),
            ("bb-sync-file", "cat > \"$1\""),
            ("bb-kubectl", "echo \"bb-kubectl $*\" >&2"),
        ] {
            write_executable(&bin.join(command), &format!("#!/bin/bash\n{body}\n"))?;
        }
        let step = dir.join(name);
        std::fs::write(&step, bashible::moved(script, &self.host, &HOST_PATHS))?;
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new("bash")
            .args(["-Eeo", "pipefail"])
            .arg(&step)
            .env("PATH", path)
            .output()
            .with_context(|| format!("run step {name}"))?;
        let _ = std::fs::remove_dir_all(&dir);
        if !out.status.success() {
            bail!("step {name}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(())
    }
}

fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}
