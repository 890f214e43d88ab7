//! bashible's side of a NodeGroupConfiguration, for tests where bashible does not run: a step's content
//! rendered as bashible renders it (Go templates over the node's context: `cri`, `nodeGroup`), by the
//! real helm, and the host paths of the rendered script moved under a root, so the script runs against
//! a node made of files instead of the machine.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use serde_json::Value;

/// The script bashible would run on a node with `context`: `content` rendered by helm's Go templates.
pub fn render(helm: &Path, content: &str, context: &Value) -> anyhow::Result<String> {
    static RENDERS: AtomicUsize = AtomicUsize::new(0);
    let chart = std::env::temp_dir().join(format!(
        "bashible-step-{}-{}",
        std::process::id(),
        RENDERS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(chart.join("templates"))?;
    std::fs::write(chart.join("Chart.yaml"), "apiVersion: v2\nname: step\nversion: 0.1.0\n")?;
    std::fs::write(chart.join("step.tpl"), content)?;
    // helm checks that its output is YAML; JSON is, and needs no YAML parser here.
    std::fs::write(
        chart.join("templates/step.yaml"),
        "{\"script\": {{ tpl (.Files.Get \"step.tpl\") .Values | toJson }}}\n",
    )?;
    std::fs::write(chart.join("context.json"), context.to_string())?;
    let out = Command::new(helm)
        .args(["template", "step"])
        .arg(&chart)
        .arg("-f")
        .arg(chart.join("context.json"))
        .output()
        .with_context(|| format!("run {}", helm.display()));
    let _ = std::fs::remove_dir_all(&chart);
    let out = out?;
    if !out.status.success() {
        bail!(
            "helm template of a bashible step: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout)?;
    let json: String = text
        .lines()
        .filter(|line| !line.starts_with("---") && !line.starts_with('#'))
        .collect();
    let rendered: Value = serde_json::from_str(&json).with_context(|| format!("helm's output: {text}"))?;
    rendered["script"]
        .as_str()
        .map(str::to_owned)
        .context("no script in helm's output")
}

/// `script` with every path that starts with one of `host_paths` (absolute, e.g. `/etc/containerd/`)
/// moved under `root`.
pub fn moved(script: &str, root: &Path, host_paths: &[&str]) -> String {
    host_paths.iter().fold(script.to_owned(), |script, path| {
        script.replace(path, &format!("{}{path}", root.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_move_under_the_root() {
        let script = "cat /etc/containerd/conf.d/a.toml /sys/bus/pci/devices/x /etc/hosts";
        assert_eq!(
            moved(
                script,
                Path::new("/node"),
                &["/etc/containerd/", "/sys/bus/pci/devices"]
            ),
            "cat /node/etc/containerd/conf.d/a.toml /node/sys/bus/pci/devices/x /etc/hosts"
        );
    }
}
