//! A fake preparer and a started plugin under a temporary kubelet root, shared by the tests.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use component_base::Shutdown;
use kubelet_plugin::{ClaimPreparer, ClaimRef, PluginConfig, PluginServer, PreparedDevice};

/// Prepares every claim into one device named after it, except claims whose name starts with
/// `fail-`; records every call.
#[derive(Default)]
pub struct FakePreparer {
    pub prepared: Mutex<Vec<ClaimRef>>,
    pub unprepared: Mutex<Vec<ClaimRef>>,
}

impl ClaimPreparer for FakePreparer {
    async fn prepare(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        self.prepared.lock().unwrap().push(claim.clone());
        if claim.name.starts_with("fail-") {
            return Err(format!("claim {}/{}: device gpu0 is busy", claim.namespace, claim.name));
        }
        Ok(vec![PreparedDevice {
            request_names: vec!["gpu".into()],
            pool_name: "gpus/node-a".into(),
            device_name: format!("gpu-{}", claim.name),
            cdi_device_ids: vec![format!("gpu.deckhouse.io/claim={}", claim.uid)],
            share_id: Some(format!("share-{}", claim.uid)),
        }])
    }

    async fn unprepare(&self, claim: ClaimRef) -> Result<(), String> {
        self.unprepared.lock().unwrap().push(claim.clone());
        if claim.name.starts_with("fail-") {
            return Err(format!(
                "claim {}/{}: MIG instance is in use",
                claim.namespace, claim.name
            ));
        }
        Ok(())
    }
}

pub struct RunningPlugin {
    pub root: tempfile::TempDir,
    pub preparer: Arc<FakePreparer>,
    pub server: PluginServer,
    pub shutdown: Shutdown,
}

pub fn config(root: &std::path::Path) -> PluginConfig {
    PluginConfig {
        kubelet_root: root.to_owned(),
        ..PluginConfig::default()
    }
}

pub async fn start_plugin() -> RunningPlugin {
    let root = tempfile::tempdir().unwrap();
    let preparer = Arc::new(FakePreparer::default());
    let shutdown = Shutdown::new();
    let server = PluginServer::start(config(root.path()), Arc::clone(&preparer), shutdown.clone())
        .await
        .expect("the plugin starts");
    RunningPlugin {
        root,
        preparer,
        server,
        shutdown,
    }
}

pub fn claim(name: &str, uid: &str) -> ClaimRef {
    ClaimRef {
        namespace: "team-a".into(),
        name: name.into(),
        uid: uid.into(),
    }
}
