//! The module's NodeGroupConfigurations as bashible runs them: each script rendered by the real helm
//! from the chart, its bashible template rendered by the real helm (Go templates, as bashible renders
//! them) for a NodeGroup, then run by bash against a node made of files: PCI devices, containerd's
//! conf.d, the kubelet's kubeconfig. bashible's own commands (bb-kubectl, bb-sync-file, ...) and crictl
//! are stand-ins that record what they are asked; every host path the scripts touch is moved under
//! the node's root.

mod support;

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use support::rendered_rbac::{helm_binary, of_kind, render_chart};

const CDI_CONF: &str = "etc/containerd/conf.d/gpu-cdi.toml";
/// Every host path the module's NodeGroupConfigurations touch.
const HOST_PATHS: [&str; 4] = [
    "/sys/bus/pci/devices",
    "/etc/containerd/",
    "/etc/nvidia-container-runtime/",
    "/etc/kubernetes/",
];

/// The content of the chart's NodeGroupConfiguration `name`.
fn configuration(name: &str) -> String {
    let objects = render_chart(&["driver-ready"]);
    let found = of_kind(&objects, "NodeGroupConfiguration")
        .find(|c| c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no NodeGroupConfiguration {name}"));
    found["spec"]["content"].as_str().unwrap().to_owned()
}

/// The script bashible would run: `content` rendered by helm's Go templates with the bashible
/// context `context` (`cri`, `nodeGroup`).
fn bashible_render(content: &str, context: &Value) -> String {
    testbed::bashible::render(&helm_binary(), content, context).unwrap()
}

/// A node as files, with the stand-ins of bashible's commands and crictl.
struct Node {
    root: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = Node {
            root: tempfile::tempdir().unwrap(),
        };
        let stand_ins = [
            ("bb-d8-node-name", "echo worker-a"),
            ("bb-log-error", "echo \"$@\" >&2"),
            ("bb-sync-file", "cat > \"$1\""),
            ("sleep", "true"),
            ("crictl", "cat \"$ROOT/crictl-info\""),
            // Records every call; `get` prints the node label in $ROOT/node-label; fails while
            // $ROOT/api-down exists (the API server cannot be reached).
            (
                "bb-kubectl",
                "echo \"$*\" >> \"$ROOT/kubectl.log\"\n[ ! -e \"$ROOT/api-down\" ] || exit 1\n\
                 case \" $* \" in *\" get \"*) cat \"$ROOT/node-label\" 2>/dev/null || true ;; esac",
            ),
        ];
        for (name, body) in stand_ins {
            node.write(&format!("bin/{name}"), &format!("#!/bin/bash\n{body}\n"));
            let path = node.path(&format!("bin/{name}"));
            Command::new("chmod").arg("+x").arg(path).status().unwrap();
        }
        fs::create_dir_all(node.path("sys/bus/pci/devices")).unwrap();
        node
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn pci_device(&self, address: &str, vendor: &str, class: &str) -> &Node {
        self.write(&format!("sys/bus/pci/devices/{address}/vendor"), &format!("{vendor}\n"));
        self.write(&format!("sys/bus/pci/devices/{address}/class"), &format!("{class}\n"));
        self
    }

    fn joined(&self) -> &Node {
        self.write("etc/kubernetes/kubelet.conf", "apiVersion: v1\nkind: Config\n");
        self
    }

    /// Runs `script` as bashible runs a step (bash, errexit, pipefail), host paths under the root.
    fn run(&self, script: &str) {
        let root = self.root.path().display().to_string();
        let moved = testbed::bashible::moved(script, self.root.path(), &HOST_PATHS);
        self.write("step.sh", &moved);
        let out = Command::new("bash")
            .args(["-Eeo", "pipefail"])
            .arg(self.path("step.sh"))
            .env("ROOT", self.root.path())
            .env("PATH", format!("{root}/bin:{}", std::env::var("PATH").unwrap()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the step failed: {}\n{moved}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn cdi_conf(&self) -> Option<String> {
        fs::read_to_string(self.path(CDI_CONF)).ok()
    }

    fn kubectl_calls(&self) -> Vec<String> {
        // The stand-in kubectl makes the log with its first call: no file is no call.
        match fs::read_to_string(self.path("kubectl.log")) {
            Ok(log) => log.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("kubectl.log: {e}"),
        }
    }
}

fn worker(cri: &str) -> Value {
    json!({"cri": cri, "nodeGroup": {"name": "worker"}})
}

const NVIDIA_3D: (&str, &str) = ("0x10de", "0x030200");

fn enabled(conf: &Option<String>) -> bool {
    conf.as_deref().is_some_and(|c| {
        c.contains("enable_cdi = true") && c.contains(r#"cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]"#)
    })
}

#[test]
fn cdi_is_turned_on_in_containerd_1_7_only_where_the_module_serves_gpus() {
    let content = configuration("gpu-containerd-cdi.sh");
    let on_gpu_worker = bashible_render(&content, &worker("Containerd"));

    // A joined GPU node of a plain NodeGroup, and the same node at bootstrap (no kubelet yet).
    for joined in [true, false] {
        let node = Node::new();
        node.pci_device("0000:3b:00.0", NVIDIA_3D.0, NVIDIA_3D.1);
        if joined {
            node.joined();
        }
        node.run(&on_gpu_worker);
        assert!(enabled(&node.cdi_conf()), "joined {joined}: {:?}", node.cdi_conf());
    }

    // No NVIDIA GPU (an Intel GPU, NVIDIA's HDMI audio function): a file left from before goes.
    let node = Node::new();
    node.joined()
        .pci_device("0000:00:02.0", "0x8086", "0x030000")
        .pci_device("0000:3b:00.1", "0x10de", "0x040300");
    node.write(CDI_CONF, "stale");
    node.run(&on_gpu_worker);
    assert_eq!(node.cdi_conf(), None);

    // The admin's opt-out label removes it; while the API server cannot be asked nothing changes.
    let node = Node::new();
    node.joined().pci_device("0000:3b:00.0", NVIDIA_3D.0, NVIDIA_3D.1);
    node.write("node-label", "false");
    node.write(CDI_CONF, "written before");
    node.write("api-down", "");
    node.run(&on_gpu_worker);
    assert_eq!(node.cdi_conf().as_deref(), Some("written before"));
    fs::remove_file(node.path("api-down")).unwrap();
    node.run(&on_gpu_worker);
    assert_eq!(node.cdi_conf(), None);
    assert!(
        node.kubectl_calls()
            .iter()
            .all(|c| c.contains("get node worker-a") && c.contains("containerd-cdi-config")),
        "{:?}",
        node.kubectl_calls()
    );

    // Nodes the module never serves lose the file: the master NodeGroup, a NodeGroup with spec.gpu.
    for context in [
        json!({"cri": "Containerd", "nodeGroup": {"name": "master"}}),
        json!({"cri": "Containerd", "nodeGroup": {"name": "gpu", "gpu": {"sharing": "TimeSlicing"}}}),
    ] {
        let node = Node::new();
        node.joined().pci_device("0000:3b:00.0", NVIDIA_3D.0, NVIDIA_3D.1);
        node.write(CDI_CONF, "written before");
        node.run(&bashible_render(&content, &context));
        assert_eq!(node.cdi_conf(), None, "{context}");
    }

    // containerd 2 (CDI on by default) and runtimes Deckhouse does not manage: nothing is touched.
    for cri in ["ContainerdV2", "NotManaged"] {
        let node = Node::new();
        node.joined().pci_device("0000:3b:00.0", NVIDIA_3D.0, NVIDIA_3D.1);
        node.write(CDI_CONF, "the admin's");
        node.run(&bashible_render(&content, &worker(cri)));
        assert_eq!(node.cdi_conf().as_deref(), Some("the admin's"), "{cri}");
        assert!(node.kubectl_calls().is_empty(), "{cri}");
    }
}

#[test]
fn the_node_labels_follow_its_pci_devices_and_what_the_running_containerd_reports() {
    let script = bashible_render(&configuration("gpu-detect-node.sh"), &worker("Containerd"));
    let cdi_on = r#"{"config": {"enableCDI": true, "cdiSpecDirs": ["/etc/cdi"]}}"#;
    // (PCI devices, crictl info) -> (nvidia-gpu, cdi). NVIDIA's HDMI audio function and an Intel GPU
    // are no NVIDIA GPU.
    let nvidia_audio = ("0000:3b:00.1", "0x10de", "0x040300");
    let intel_gpu = ("0000:00:02.0", "0x8086", "0x030000");
    let nvidia_3d = ("0000:3b:00.0", NVIDIA_3D.0, NVIDIA_3D.1);
    let cases = [
        (vec![nvidia_3d, nvidia_audio], cdi_on, ("true", "true")),
        (
            vec![nvidia_3d],
            r#"{"config": {"enableCDI": false}}"#,
            ("true", "false"),
        ),
        (vec![nvidia_audio, intel_gpu], cdi_on, ("false", "true")),
        (vec![], "", ("false", "false")),
    ];
    for (devices, info, (gpu, cdi)) in cases {
        let node = Node::new();
        node.joined();
        for (address, vendor, class) in &devices {
            node.pci_device(address, vendor, class);
        }
        node.write("crictl-info", info);
        node.run(&script);
        assert_eq!(
            node.kubectl_calls(),
            [format!(
                "--kubeconfig {} label --overwrite=true node worker-a gpu.deckhouse.io/nvidia-gpu={gpu} gpu.deckhouse.io/cdi={cdi}",
                node.path("etc/kubernetes/kubelet.conf").display()
            )],
            "{devices:?} {info}"
        );
    }
    // Before the node has joined there is nothing to label.
    let node = Node::new();
    node.run(&script);
    assert!(node.kubectl_calls().is_empty());
}

const TOOLKIT_CONF: &str = "etc/nvidia-container-runtime/config.toml";
const ENVVAR_KEY: &str = "accept-nvidia-visible-devices-envvar-when-unprivileged";

/// The toolkit's configuration as the step leaves it: the top-level key set to false exactly once,
/// before any table, and every other line as it was.
fn assert_envvar_refused(conf: &str, other_lines: &[&str]) {
    let lines: Vec<&str> = conf.lines().collect();
    let keys: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].contains(ENVVAR_KEY)).collect();
    assert_eq!(keys.len(), 1, "{conf}");
    assert_eq!(lines[keys[0]], format!("{ENVVAR_KEY} = false"), "{conf}");
    let first_table = lines
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .unwrap_or(lines.len());
    assert!(keys[0] < first_table, "the key must be top-level:\n{conf}");
    for line in other_lines {
        assert!(lines.contains(line), "{line} lost:\n{conf}");
    }
}

#[test]
fn nvidia_runtime_refuses_gpus_by_environment_where_the_module_serves_the_node() {
    let content = configuration("gpu-nvidia-runtime-envvar.sh");
    let served = bashible_render(&content, &worker("ContainerdV2"));
    let toolkit_tables = "[nvidia-container-runtime]\nmode = \"cdi\"\nruntimes = [\"runc\"]\n";

    // The toolkit's packaged file (the key commented out at its default), a file setting it true, and
    // one without it: each ends with the key false, the rest kept; a second run changes nothing.
    for before in [
        format!("#{ENVVAR_KEY} = true\n{toolkit_tables}"),
        format!("  {ENVVAR_KEY}=true\n{toolkit_tables}"),
        toolkit_tables.to_owned(),
        String::new(),
    ] {
        let node = Node::new();
        node.write(TOOLKIT_CONF, &before);
        node.run(&served);
        let after = fs::read_to_string(node.path(TOOLKIT_CONF)).unwrap();
        let kept: Vec<&str> = if before.is_empty() {
            vec![]
        } else {
            vec!["[nvidia-container-runtime]", "mode = \"cdi\"", "runtimes = [\"runc\"]"]
        };
        assert_envvar_refused(&after, &kept);
        node.run(&served);
        assert_eq!(
            fs::read_to_string(node.path(TOOLKIT_CONF)).unwrap(),
            after,
            "idempotent"
        );
    }

    // The toolkit installed without a configuration file: the file is the one key (the toolkit
    // defaults every other one).
    let node = Node::new();
    node.write("bin/nvidia-container-runtime", "#!/bin/sh\n");
    Command::new("chmod")
        .arg("+x")
        .arg(node.path("bin/nvidia-container-runtime"))
        .status()
        .unwrap();
    node.run(&served);
    assert_eq!(
        fs::read_to_string(node.path(TOOLKIT_CONF)).unwrap(),
        format!("{ENVVAR_KEY} = false\n")
    );

    // No NVIDIA toolkit: nothing is written.
    let node = Node::new();
    node.run(&served);
    assert!(!node.path(TOOLKIT_CONF).exists());

    // A NodeGroup with spec.gpu stays node-manager's: its device plugin hands out GPUs by that variable.
    let node = Node::new();
    node.write(TOOLKIT_CONF, toolkit_tables);
    let gpu_group = json!({"cri": "ContainerdV2", "nodeGroup": {"name": "gpu", "gpu": {"sharing": "Exclusive"}}});
    node.run(&bashible_render(&content, &gpu_group));
    assert_eq!(fs::read_to_string(node.path(TOOLKIT_CONF)).unwrap(), toolkit_tables);
}
