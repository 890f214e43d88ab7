//! The records of every card of the node, kept in a file beside the kubelet plugin's checkpoint so
//! that a restarted handler knows what the previous one saw: a handler restart alone never makes a
//! card healthy. The file carries the node's boot id: a reboot resets every GPU, so records of an
//! earlier boot lose their Xids (and say so).
//!
//! This is the crate's only I/O: a JSON file written atomically and durably (temporary file, fsync,
//! rename, fsync of the directory).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use gpu_vendor::PciAddress;
use serde::{Deserialize, Serialize};

use crate::record::{CardRecord, Recovery};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthLedger {
    pub boot_id: String,
    #[serde(default)]
    pub cards: BTreeMap<PciAddress, CardRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("health state file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("health state file {path} is not valid: {source}")]
    Invalid { path: PathBuf, source: serde_json::Error },
}

impl HealthLedger {
    /// Reads the ledger kept at `path` for the boot `boot_id`. A missing file is an empty ledger;
    /// records of another boot lose their Xids, each card's loss returned as a recovery.
    pub fn load(path: &Path, boot_id: &str) -> Result<(Self, Vec<(PciAddress, Recovery)>), LedgerError> {
        let io_error = |source| LedgerError::Io {
            path: path.to_owned(),
            source,
        };
        let mut ledger: HealthLedger = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| LedgerError::Invalid {
                path: path.to_owned(),
                source,
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => HealthLedger::default(),
            Err(e) => return Err(io_error(e)),
        };
        let mut recoveries = Vec::new();
        if ledger.boot_id != boot_id {
            if !ledger.boot_id.is_empty() {
                for (card, record) in &mut ledger.cards {
                    let why = "the node rebooted, which resets every GPU".to_owned();
                    recoveries.extend(record.clear_all(why).map(|recovery| (*card, recovery)));
                }
            }
            ledger.boot_id = boot_id.to_owned();
        }
        Ok((ledger, recoveries))
    }

    /// Writes the ledger to `path` atomically and durably (the rename included, see `durable_file`).
    pub fn save(&self, path: &Path) -> Result<(), LedgerError> {
        let bytes = serde_json::to_vec_pretty(self).expect("the ledger serialises");
        durable_file::write_atomically(path, &bytes).map_err(|error| LedgerError::Io {
            path: path.to_owned(),
            source: io::Error::new(error.source.kind(), error.to_string()),
        })
    }

    /// The record of `card`, created (adopting the current clear annotation) when new.
    pub fn card(&mut self, card: PciAddress, uuid: Option<&str>, clear_token: Option<&str>) -> &mut CardRecord {
        self.cards
            .entry(card)
            .or_insert_with(|| CardRecord::new(uuid, clear_token))
    }

    /// Drops the records of cards no longer on the node that hold nothing worth keeping.
    pub fn forget_absent(&mut self, present: &impl Fn(&PciAddress) -> bool) {
        self.cards
            .retain(|card, record| present(card) || !record.xids.is_empty());
    }
}
