//! The container's root from what an OCI runtime hands a hook: the state on standard input names
//! the bundle; the bundle's `config.json` names the root (`root.path`, relative to the bundle or
//! absolute).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::LdCacheError;

pub fn container_root(state: &str) -> Result<PathBuf, LdCacheError> {
    let state: Value = serde_json::from_str(state).map_err(|e| LdCacheError::State(e.to_string()))?;
    let bundle = PathBuf::from(
        state["bundle"]
            .as_str()
            .ok_or_else(|| LdCacheError::State("no `bundle`".into()))?,
    );
    let config_path = bundle.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(|source| LdCacheError::Io {
        action: "read",
        path: config_path.clone(),
        source,
    })?;
    let config: Value =
        serde_json::from_str(&text).map_err(|e| LdCacheError::State(format!("{}: {e}", config_path.display())))?;
    let root = config["root"]["path"]
        .as_str()
        .ok_or_else(|| LdCacheError::State(format!("{}: no root.path", config_path.display())))?;
    let root = Path::new(root);
    Ok(if root.is_absolute() {
        root.to_path_buf()
    } else {
        bundle.join(root)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_root_is_the_bundles() {
        let bundle = tempfile::tempdir().unwrap();
        std::fs::write(bundle.path().join("config.json"), r#"{"root": {"path": "rootfs"}}"#).unwrap();
        let state = format!(
            r#"{{"ociVersion": "1.2.0", "id": "c", "pid": 7, "bundle": "{}"}}"#,
            bundle.path().display()
        );
        assert_eq!(container_root(&state).unwrap(), bundle.path().join("rootfs"));
        assert!(container_root("{}").unwrap_err().to_string().contains("bundle"));
    }
}
