//! The checkpoint file: `{"version": 2, "checksum": <sha256 of data>, "data": {...}}`,
//! written atomically, verified on every read; its claims are discarded only after a reboot.
//!
//! Versions: 1 had no record of which cards' MIG mode the node changed; this handler reads it as
//! version 2 with every card that carries a recorded MIG claim taken as switched on by the node
//! (what version 1 assumed of every card) and writes version 2. A later version is refused with
//! both numbers named: this handler cannot know what it would drop.

use std::fs;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::{CheckpointClaim, CheckpointData};
use crate::atomic_file::write_atomically;
use crate::error::PrepareError;

const VERSION: u32 = 2;
/// The oldest version this handler reads.
const OLDEST_READABLE: u32 = 1;

#[derive(Serialize)]
struct FileOut<'a> {
    version: u32,
    checksum: String,
    data: &'a RawValue,
}

#[derive(Deserialize)]
struct FileIn<'a> {
    version: u32,
    checksum: String,
    #[serde(borrow)]
    data: &'a RawValue,
}

/// The checkpoint as read, with the claims a reboot made void.
#[derive(Debug, Default)]
pub(crate) struct LoadedCheckpoint {
    pub data: CheckpointData,
    /// Claims recorded under an earlier boot id; not part of `data`.
    pub dropped_after_reboot: Vec<(String, CheckpointClaim)>,
}

#[derive(Debug, Clone)]
pub(crate) struct CheckpointStore {
    path: PathBuf,
    boot_id_path: PathBuf,
}

impl CheckpointStore {
    pub fn new(path: PathBuf, boot_id_path: PathBuf) -> Self {
        CheckpointStore { path, boot_id_path }
    }

    /// Reads and verifies the checkpoint. A missing file is an empty
    /// checkpoint; a file that fails verification is an error, never empty.
    pub fn load(&self) -> Result<LoadedCheckpoint, PrepareError> {
        let boot_id = self.boot_id()?;
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(LoadedCheckpoint {
                    data: CheckpointData {
                        boot_id,
                        ..CheckpointData::default()
                    },
                    dropped_after_reboot: Vec::new(),
                });
            }
            Err(e) => return Err(PrepareError::io("read", &self.path)(e)),
        };
        let data = self.verify(&text)?;
        if data.boot_id == boot_id {
            return Ok(LoadedCheckpoint {
                data,
                dropped_after_reboot: Vec::new(),
            });
        }
        tracing::warn!(
            checkpoint = %self.path.display(),
            recorded_boot_id = %data.boot_id,
            boot_id = %boot_id,
            claims = data.claims.len(),
            "the node rebooted since these claims were prepared; their MIG instances and CDI specs are gone, starting empty"
        );
        // What the node did to cards' MIG modes outlives the boot where the mode does (Ampere
        // keeps it in the InfoROM); reconciliation drops the records the card disproves.
        Ok(LoadedCheckpoint {
            data: CheckpointData {
                boot_id,
                claims: Default::default(),
                mig_enabled_by_node: data.mig_enabled_by_node,
                mig_disabled_by_node: data.mig_disabled_by_node,
            },
            dropped_after_reboot: data.claims.into_iter().collect(),
        })
    }

    /// Replaces the checkpoint durably.
    pub fn save(&self, data: &CheckpointData) -> Result<(), PrepareError> {
        let data_json = serde_json::to_string(data).map_err(|e| self.corrupt(format!("cannot encode: {e}")))?;
        let raw = RawValue::from_string(data_json).map_err(|e| self.corrupt(format!("cannot encode: {e}")))?;
        let file = FileOut {
            version: VERSION,
            checksum: checksum(raw.get()),
            data: &raw,
        };
        let text = serde_json::to_vec(&file).map_err(|e| self.corrupt(format!("cannot encode: {e}")))?;
        write_atomically(&self.path, &text)
    }

    pub(crate) fn verify(&self, text: &str) -> Result<CheckpointData, PrepareError> {
        let file: FileIn = serde_json::from_str(text).map_err(|e| self.corrupt(format!("not a checkpoint: {e}")))?;
        if !(OLDEST_READABLE..=VERSION).contains(&file.version) {
            return Err(self.corrupt(format!(
                "version {} is not supported (this handler reads versions {OLDEST_READABLE} to {VERSION}); \
                 a newer handler wrote it, or it was damaged",
                file.version
            )));
        }
        let actual = checksum(file.data.get());
        if actual != file.checksum {
            return Err(self.corrupt(format!(
                "checksum mismatch (recorded {}, content has {actual}); the file was damaged or edited",
                file.checksum
            )));
        }
        let mut data: CheckpointData =
            serde_json::from_str(file.data.get()).map_err(|e| self.corrupt(format!("unreadable data: {e}")))?;
        if file.version == 1 {
            let mig_cards: Vec<_> = data
                .claims
                .values()
                .flat_map(|claim| &claim.devices)
                .filter(|device| matches!(device.target, dra_offers::OfferedDevice::Mig { .. }))
                .map(|device| *device.target.pci_address())
                .collect();
            data.mig_enabled_by_node.extend(mig_cards);
        }
        Ok(data)
    }

    fn boot_id(&self) -> Result<String, PrepareError> {
        let text = fs::read_to_string(&self.boot_id_path).map_err(PrepareError::io("read", &self.boot_id_path))?;
        let boot_id = text.trim();
        if boot_id.is_empty() {
            return Err(PrepareError::HostFile {
                path: self.boot_id_path.clone(),
                reason: "empty boot id".into(),
            });
        }
        Ok(boot_id.to_owned())
    }

    fn corrupt(&self, reason: String) -> PrepareError {
        PrepareError::CorruptCheckpoint {
            path: self.path.clone(),
            reason,
        }
    }
}

pub(crate) fn checksum(data: &str) -> String {
    Sha256::digest(data.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::ClaimState;

    fn store(dir: &std::path::Path, boot_id: &str) -> CheckpointStore {
        fs::write(dir.join("boot_id"), format!("{boot_id}\n")).unwrap();
        CheckpointStore::new(dir.join("checkpoint.json"), dir.join("boot_id"))
    }

    fn one_claim(boot_id: &str) -> CheckpointData {
        let mut data = CheckpointData {
            boot_id: boot_id.into(),
            ..CheckpointData::default()
        };
        data.claims.insert(
            "uid-1".into(),
            CheckpointClaim {
                namespace: "default".into(),
                name: "train".into(),
                state: ClaimState::PrepareCompleted,
                devices: Vec::new(),
            },
        );
        data
    }

    #[test]
    fn a_saved_checkpoint_reads_back_with_a_checksum_of_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path(), "boot-a");
        assert!(store.load().unwrap().data.claims.is_empty());
        store.save(&one_claim("boot-a")).unwrap();
        assert_eq!(store.load().unwrap().data, one_claim("boot-a"));

        let text = fs::read_to_string(dir.path().join("checkpoint.json")).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(file["version"], 2);
        let data = serde_json::to_string(&one_claim("boot-a")).unwrap();
        assert_eq!(file["checksum"], checksum(&data));
        assert_eq!(file["data"]["claims"]["uid-1"]["state"], "PrepareCompleted");
    }

    #[test]
    fn a_changed_byte_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path(), "boot-a");
        store.save(&one_claim("boot-a")).unwrap();
        let path = dir.path().join("checkpoint.json");
        let text = fs::read_to_string(&path).unwrap().replace("train", "trains");
        fs::write(&path, text).unwrap();
        let error = store.load().unwrap_err();
        assert!(matches!(error, PrepareError::CorruptCheckpoint { .. }));
        assert!(error.to_string().contains(&path.display().to_string()), "{error}");
        assert!(error.to_string().contains("checksum mismatch"), "{error}");
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path(), "boot-a");
        fs::write(
            dir.path().join("checkpoint.json"),
            r#"{"version":3,"checksum":"x","data":{}}"#,
        )
        .unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(
            error.contains("version 3 is not supported (this handler reads versions 1 to 2)"),
            "{error}"
        );
    }

    #[test]
    fn claims_of_an_earlier_boot_are_dropped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path(), "boot-a").save(&one_claim("boot-a")).unwrap();
        let loaded = store(dir.path(), "boot-b").load().unwrap();
        assert!(loaded.data.claims.is_empty());
        assert_eq!(loaded.data.boot_id, "boot-b");
        assert_eq!(loaded.dropped_after_reboot.len(), 1);
        assert_eq!(loaded.dropped_after_reboot[0].0, "uid-1");
    }
}
