//! The driver as installed on a host (`nvidiaDriverRoot: /`), in the fixture's `usr` tree that the
//! node lays over the machine's `/usr`: the libraries under their versioned names with the soname
//! links the driver's installer makes, the tools in `usr/bin`, and the mock NVML's machine.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use anyhow::Context;
use host_fixtures::HostTree;
use mock_nvml::machine::MachineFile;

use super::{A30_ADDRESS, MOCK_NVML_DIR, nvidia_cards};

/// The driver version the mock NVML reports (its default) and the libraries' file names carry.
pub const DRIVER_VERSION: &str = "580.76.05";

const LIB_DIR: &str = "usr/lib/x86_64-linux-gnu";

/// (built artifact, installed library name, soname, extra link)
const LIBRARIES: [(&str, &str, &str, Option<&str>); 2] = [
    ("libmock_nvml.so", "libnvidia-ml.so", "libnvidia-ml.so.1", None),
    ("libmock_cuda.so", "libcuda.so", "libcuda.so.1", Some("libcuda.so")),
];

const TOOLS: [&str; 2] = ["nvidia-smi", "nvidia-cuda-mps-control"];

/// Copies the mock libraries and stand-in tools from `tools` (cargo's output directory).
pub fn install_driver_root(host: &HostTree, tools: &Path) -> anyhow::Result<()> {
    let lib_dir = host.path(LIB_DIR);
    fs::create_dir_all(&lib_dir)?;
    for (artifact, name, soname, extra) in LIBRARIES {
        let file = format!("{name}.{DRIVER_VERSION}");
        copy_executable(&tools.join(artifact), &lib_dir.join(&file))?;
        symlink(&file, lib_dir.join(soname))?;
        if let Some(link) = extra {
            symlink(soname, lib_dir.join(link))?;
        }
    }
    let bin = host.path("usr/bin");
    fs::create_dir_all(&bin)?;
    for tool in TOOLS {
        copy_executable(&tools.join(tool), &bin.join(tool))?;
    }
    Ok(())
}

fn copy_executable(from: &Path, to: &Path) -> anyhow::Result<()> {
    fs::copy(from, to).with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// `mock-nvml/machine.yaml` (with the model files it includes): the fixture's cards, in PCI order,
/// seen only through their device nodes.
pub fn install_mock_machine(host: &HostTree) -> anyhow::Result<()> {
    let dir = host.path(MOCK_NVML_DIR);
    fs::create_dir_all(&dir)?;
    fs::write(
        dir.join("h100-sxm5-80gb.yaml"),
        include_str!("../../../mock-nvml/machines/h100-sxm5-80gb.yaml"),
    )?;
    fs::write(
        dir.join("a30.yaml"),
        include_str!("../../../mock-nvml/machines/a30.yaml"),
    )?;
    let h100: MachineFile = serde_yaml::from_str(include_str!("../../../mock-nvml/machines/h100-sxm5-80gb-x8.yaml"))?;
    let mut machine = String::from(
        "# The real node's cards (tools/testbed/node-up.sh): a process sees those whose device nodes it has.\n\
         include: [h100-sxm5-80gb.yaml, a30.yaml]\ndeviceNodes: /dev\ngpus:\n",
    );
    for card in nvidia_cards(host) {
        let line = if card.address == A30_ADDRESS {
            format!(
                "  - {{ pciBusId: \"{A30_ADDRESS}\", model: a30-24gb, uuid: \"GPU-e1a30000-0000-4000-8000-a30000000009\" }}\n"
            )
        } else {
            let uuid = h100
                .gpus
                .iter()
                .find(|gpu| gpu.pci_bus_id.to_string() == card.address)
                .map(|gpu| gpu.uuid.clone())
                .with_context(|| format!("no H100 at {} in h100-sxm5-80gb-x8.yaml", card.address))?;
            format!(
                "  - {{ pciBusId: \"{}\", model: h100-sxm5-80gb, uuid: \"{uuid}\" }}\n",
                card.address
            )
        };
        machine.push_str(&line);
    }
    fs::write(dir.join("machine.yaml"), machine)?;
    Ok(())
}
