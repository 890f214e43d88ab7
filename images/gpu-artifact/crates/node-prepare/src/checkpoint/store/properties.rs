//! Bad input by the thousand for the checkpoint file: random bytes, a real checkpoint truncated
//! or with a byte changed, every version number, claims of any shape. A file that passes is read
//! back exactly; one that does not is refused as corrupt with the file and the reason named, never
//! read as empty (the claims it records would be lost) and never a panic.

use std::collections::BTreeMap;

use dra_offers::OfferedDevice;
use gpu_vendor::MigPlacement;
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};

use super::{CheckpointStore, checksum};
use crate::checkpoint::{CheckpointClaim, CheckpointData, CheckpointDevice, ClaimState, MigInstanceRecord};
use crate::error::PrepareError;

fn store() -> CheckpointStore {
    CheckpointStore::new(
        "/plugin/checkpoint.json".into(),
        "/proc/sys/kernel/random/boot_id".into(),
    )
}

fn device() -> impl Strategy<Value = CheckpointDevice> {
    (
        any::<String>(),
        0u32..8,
        proptest::option::of((any::<u32>(), any::<u32>(), any::<String>())),
        any::<bool>(),
    )
        .prop_map(|(name, start, instance, attempted)| CheckpointDevice {
            request: "gpu".into(),
            pool: "gpus/w1".into(),
            device: name,
            share_id: None,
            target: OfferedDevice::Mig {
                pci_address: "0000:01:00.0"
                    .parse()
                    .unwrap_or_else(|_| unreachable!("a valid address")),
                parent_uuid: "GPU-1".into(),
                physical_gpu: "w1-0".into(),
                profile_id: 5,
                profile_name: "2g.12gb".into(),
                placement: MigPlacement { start, size: 2 },
            },
            cdi_device_ids: Vec::new(),
            mig_instance: instance.map(|(gpu_instance_id, compute_instance_id, uuid)| MigInstanceRecord {
                gpu_instance_id,
                compute_instance_id,
                uuid,
            }),
            mig_create_attempted: attempted,
            sharing: None,
            vfio: None,
            admin_access: false,
        })
}

fn data() -> impl Strategy<Value = CheckpointData> {
    let claim = (
        any::<String>(),
        any::<bool>(),
        proptest::collection::vec(device(), 0..3),
    )
        .prop_map(|(name, completed, devices)| CheckpointClaim {
            namespace: "ns".into(),
            name,
            state: if completed {
                ClaimState::PrepareCompleted
            } else {
                ClaimState::PrepareStarted
            },
            devices,
        });
    (
        any::<String>(),
        proptest::collection::btree_map(any::<String>(), claim, 0..3),
    )
        .prop_map(|(boot_id, claims)| CheckpointData {
            boot_id,
            claims: claims.into_iter().collect::<BTreeMap<_, _>>(),
            ..CheckpointData::default()
        })
}

/// The text `save` would write for `data` at `version`.
fn file_text(data: &CheckpointData, version: u32) -> String {
    let json = serde_json::to_string(data).unwrap_or_default();
    format!(
        r#"{{"version":{version},"checksum":"{}","data":{json}}}"#,
        checksum(&json)
    )
}

#[derive(Debug, Clone)]
enum Damage {
    None,
    Truncate(usize),
    ChangeByte(usize, u8),
    Version(u32),
    Bytes(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::None),
        any::<usize>().prop_map(Damage::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Damage::ChangeByte(at, byte)),
        prop_oneof![Just(0u32), Just(1), Just(2), Just(3), any::<u32>()].prop_map(Damage::Version),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Damage::Bytes),
    ]
}

#[test]
fn property_any_checkpoint_file_reads_back_exactly_or_is_refused_as_corrupt() {
    check("checkpoint file", file!(), (data(), damage()), |(data, damage)| {
        let original = file_text(&data, 2);
        let text = match &damage {
            Damage::None => original.clone(),
            Damage::Truncate(at) => original.chars().take(at % (original.len() + 1)).collect(),
            Damage::ChangeByte(at, byte) => {
                let mut bytes = original.clone().into_bytes();
                let at = at % bytes.len().max(1);
                if let Some(slot) = bytes.get_mut(at) {
                    *slot = *byte;
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
            Damage::Version(version) => file_text(&data, *version),
            Damage::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        };
        match store().verify(&text) {
            // The checksum lets only the written data through (a version 1 file also gets the node's
            // MIG records filled in from its claims).
            Ok(read) => ensure(read.claims == data.claims && read.boot_id == data.boot_id, || {
                format!("{text:?} read back as different data")
            }),
            Err(PrepareError::CorruptCheckpoint { path, reason }) => ensure(
                path.ends_with("checkpoint.json") && !reason.is_empty() && text != original,
                || format!("refused a good checkpoint or named nothing: {reason}"),
            ),
            Err(other) => ensure(false, || format!("not a corrupt-checkpoint error: {other}")),
        }
    });
}
