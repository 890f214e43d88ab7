//! ensure-crds: server-side applies every CRD of `crds/` (not the `doc-*` translations) at startup, so
//! the module's own types exist before anything renders objects of them. addon-operator installs them
//! too; applying here as well keeps them current when the module is upgraded in place.

use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput};

const FIELD_MANAGER: &str = "gpu-module-hooks";

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "ensure-crds",
            path: "gpu/ensure-crds",
        },
        on_startup: Some(5),
        ..HookConfig::default()
    }
}

pub async fn run(_input: HookInput) -> anyhow::Result<HookOutput> {
    let dir = crds_dir()?;
    let crds = read_crds(&dir)?;
    let api = Api::<CustomResourceDefinition>::all(Client::try_default().await?);
    for crd in &crds {
        let name = crd.metadata.name.clone().context("a CRD without a name")?;
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
    }
    Ok(HookOutput::default())
}

/// `GPU_MODULE_CRDS_DIR`, else `crds/` of the module bundle the binary sits in (`hooks/go/<binary>`).
fn crds_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("GPU_MODULE_CRDS_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe()?;
    let module = exe
        .ancestors()
        .nth(3)
        .context("the binary is not inside a module bundle")?;
    Ok(module.join("crds"))
}

/// The CRDs to apply from `dir`, sorted by file name: every `*.yaml` but `doc-*` and `_*`.
pub fn read_crds(dir: &Path) -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            name.ends_with(".yaml") && !name.starts_with("doc-") && !name.starts_with('_')
        })
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)?;
            serde_yaml::from_str(&text).with_context(|| format!("{} is not a CRD", path.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_crds_are_read_without_their_translations() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../crds");
        let crds = read_crds(&dir).unwrap();
        let names: Vec<String> = crds.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
        assert!(names.contains(&"physicalgpus.gpu.deckhouse.io".to_owned()), "{names:?}");
        assert!(crds.iter().all(|c| c.spec.group == "gpu.deckhouse.io"));
    }
}
