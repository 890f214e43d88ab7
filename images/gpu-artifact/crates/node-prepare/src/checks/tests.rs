//! The checks on requests against recorded claims, one invariant per test.

use super::*;
use crate::checkpoint::{CheckpointClaim, CheckpointDevice, ClaimState};
use gpu_api::opaque_config::{GpuConfig, GpuSharing, OpaqueConfig, SharingStrategy, VfioDeviceConfig};
use gpu_vendor::MigPlacement;
use kubelet_plugin::ClaimRef;

const POOL: &str = "gpus/w1";

fn physical(name: &str) -> AllocatedDevice {
    AllocatedDevice {
        request: "gpu".into(),
        pool: POOL.into(),
        device: name.into(),
        share_id: None,
        share_percent: None,
        share_memory_bytes: None,
        config: None,
        vfio_allowed: false,
        admin_access: false,
        target: OfferedDevice::Physical {
            pci_address: "0000:01:00.0".parse().unwrap(),
            uuid: "GPU-1".into(),
            physical_gpu: "w1-a30-0".into(),
        },
    }
}

fn shared(strategy: SharingStrategy, share_id: &str) -> AllocatedDevice {
    let name = match strategy {
        SharingStrategy::Mps => "gpu0-mps",
        _ => "gpu0-timeslicing",
    };
    AllocatedDevice {
        share_id: Some(share_id.into()),
        share_percent: Some(50),
        target: OfferedDevice::SharedPhysical {
            pci_address: "0000:01:00.0".parse().unwrap(),
            uuid: "GPU-1".into(),
            physical_gpu: "w1-a30-0".into(),
            strategy,
        },
        ..physical(name)
    }
}

fn mig(start: u32) -> AllocatedDevice {
    AllocatedDevice {
        request: "mig".into(),
        device: format!("gpu0-mig-2g12gb-{start}"),
        target: OfferedDevice::Mig {
            pci_address: "0000:01:00.0".parse().unwrap(),
            parent_uuid: "GPU-1".into(),
            physical_gpu: "w1-a30-0".into(),
            profile_id: 5,
            profile_name: "2g.12gb".into(),
            placement: MigPlacement { start, size: 2 },
        },
        ..physical("")
    }
}

fn request(devices: Vec<AllocatedDevice>) -> PrepareRequest {
    PrepareRequest {
        claim: ClaimRef {
            namespace: "default".into(),
            name: "train".into(),
            uid: "uid-train".into(),
        },
        devices,
        vfio_requested: false,
        pods: Vec::new(),
    }
}

fn bare_metal() -> BareMetalVerdict {
    host_inventory::judge_dmi("PowerEdge R750xa", "Dell Inc.")
}

fn vm() -> BareMetalVerdict {
    host_inventory::judge_dmi("Standard PC (Q35 + ICH9, 2009)", "QEMU")
}

/// `request` checked on a node whose checkpoint holds `checkpoint`, on bare metal.
fn refused(request: &PrepareRequest, checkpoint: &CheckpointData) -> Option<String> {
    check(request, checkpoint, POOL, bare_metal).err()
}

fn recorded(devices: Vec<AllocatedDevice>) -> CheckpointData {
    let mut data = CheckpointData::default();
    let claim_request = request(devices);
    let plans = plan_devices(&claim_request).unwrap();
    let devices = claim_request
        .devices
        .into_iter()
        .zip(plans)
        .map(|(d, plan)| CheckpointDevice {
            request: d.request,
            pool: d.pool,
            device: d.device,
            share_id: d.share_id,
            target: d.target,
            cdi_device_ids: Vec::new(),
            mig_instance: None,
            mig_create_attempted: false,
            sharing: plan.sharing,
            vfio: None,
            admin_access: false,
        })
        .collect();
    let claim = CheckpointClaim {
        namespace: "ns".into(),
        name: "other".into(),
        state: ClaimState::PrepareCompleted,
        devices,
    };
    data.claims.insert("uid-other".into(), claim);
    data
}

#[test]
fn a_device_of_another_pool_is_refused() {
    let mut device = physical("gpu0");
    device.pool = "gpus/w2".into();
    let reason = refused(&request(vec![device]), &CheckpointData::default()).unwrap();
    assert_eq!(reason, "device gpu0 is from pool gpus/w2, not this node's pool gpus/w1");
}

#[test]
fn an_exclusive_device_of_another_claim_is_refused_by_name() {
    let checkpoint = recorded(vec![physical("gpu0")]);
    let reason = refused(&request(vec![physical("gpu0")]), &checkpoint).unwrap();
    assert_eq!(reason, "device gpu0 is prepared for claim ns/other");
    let checkpoint = recorded(vec![mig(0)]);
    let reason = refused(&request(vec![mig(0)]), &checkpoint).unwrap();
    assert_eq!(reason, "device gpu0-mig-2g12gb-0 is prepared for claim ns/other");
}

#[test]
fn shares_of_one_card_coexist_but_not_with_an_exclusive_allocation() {
    let checkpoint = recorded(vec![shared(SharingStrategy::Mps, "s1")]);
    assert_eq!(
        refused(
            &in_namespace("ns", request(vec![shared(SharingStrategy::Mps, "s2")])),
            &checkpoint
        ),
        None
    );
    let reason = refused(&request(vec![physical("gpu0")]), &checkpoint).unwrap();
    assert_eq!(
        reason,
        "device gpu0 would take card 0000:01:00.0 exclusively, but the card is shared (device gpu0-mps of claim ns/other)"
    );
    let reason = refused(
        &request(vec![shared(SharingStrategy::Mps, "s2")]),
        &recorded(vec![physical("gpu0")]),
    )
    .unwrap();
    assert!(reason.contains("which an exclusive allocation holds alone"), "{reason}");
}

fn in_namespace(namespace: &str, mut request: PrepareRequest) -> PrepareRequest {
    request.claim.namespace = namespace.into();
    request
}

#[test]
fn mps_shares_of_a_card_belong_to_one_namespace_and_the_refusal_names_no_other() {
    let checkpoint = recorded(vec![shared(SharingStrategy::Mps, "s1")]);
    let reason = refused(&request(vec![shared(SharingStrategy::Mps, "s2")]), &checkpoint).expect("refused");
    assert_eq!(
        reason,
        "device gpu0-mps: another namespace's MPS clients use card 0000:01:00.0; the clients of a card's MPS \
         control daemon share its /dev/shm, so a card serves the MPS claims of one namespace at a time"
    );
    assert!(!reason.contains("ns/"), "{reason}");
    let time_sliced = recorded(vec![shared(SharingStrategy::TimeSlicing, "s1")]);
    assert_eq!(
        refused(&request(vec![shared(SharingStrategy::TimeSlicing, "s2")]), &time_sliced),
        None,
        "time-slicing keeps no shared memory between its clients"
    );
}

#[test]
fn a_share_with_another_strategy_or_parameters_is_refused_naming_the_active_one() {
    let checkpoint = recorded(vec![shared(SharingStrategy::Mps, "s1")]);
    let reason = refused(&request(vec![shared(SharingStrategy::TimeSlicing, "s2")]), &checkpoint).unwrap();
    assert_eq!(
        reason,
        "card 0000:01:00.0 is shared with MPS by claims ns/other; this share asks for TimeSlicing"
    );
    let mut long = shared(SharingStrategy::TimeSlicing, "s3");
    long.config = Some(OpaqueConfig::GpuConfig(GpuConfig {
        sharing: Some(GpuSharing {
            strategy: SharingStrategy::TimeSlicing,
            time_slicing: Some(gpu_api::opaque_config::TimeSlicingConfig {
                interval: gpu_api::opaque_config::TimeSliceInterval::Long,
            }),
            mps: None,
        }),
    }));
    let checkpoint = recorded(vec![shared(SharingStrategy::TimeSlicing, "s1")]);
    let reason = refused(&request(vec![long]), &checkpoint).unwrap();
    assert_eq!(
        reason,
        "card 0000:01:00.0 is shared with TimeSlicing by claims ns/other; this share asks for TimeSlicing (interval Long)"
    );
}

#[test]
fn a_config_that_contradicts_the_offer_is_refused() {
    let mut device = shared(SharingStrategy::Mps, "s1");
    device.config = Some(OpaqueConfig::GpuConfig(GpuConfig {
        sharing: Some(GpuSharing {
            strategy: SharingStrategy::TimeSlicing,
            ..GpuSharing::default()
        }),
    }));
    let reason = refused(&request(vec![device]), &CheckpointData::default()).unwrap();
    assert_eq!(
        reason,
        "device gpu0-mps: it is a share with strategy MPS, but its config asks for sharing strategy TimeSlicing"
    );
}

#[test]
fn vfio_is_only_for_an_exclusive_whole_card_on_bare_metal() {
    let mut vfio = request(vec![physical("gpu0")]);
    vfio.vfio_requested = true;
    let reason = refused(&vfio, &CheckpointData::default()).unwrap();
    assert_eq!(
        reason,
        "device gpu0: VFIO passthrough (asked by the Pod annotation gpu.deckhouse.io/vfio) is an admin's \
         decision: it is allowed only through a DeviceClass that carries a VfioDeviceConfig, and the class of \
         request gpu does not"
    );
    vfio.devices[0].vfio_allowed = true;
    let plans = check(&vfio, &CheckpointData::default(), POOL, bare_metal).unwrap();
    assert!(plans[0].vfio);
    let reason = check(&vfio, &CheckpointData::default(), POOL, vm).unwrap_err();
    assert_eq!(
        reason,
        "device gpu0: VFIO passthrough needs a bare-metal node, and this node is not one: \
         DMI sys_vendor \"QEMU\" names a hypervisor or cloud (QEMU)"
    );
    let mut by_config = shared(SharingStrategy::Mps, "s1");
    by_config.config = Some(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {}));
    let reason = refused(&request(vec![by_config]), &CheckpointData::default()).unwrap();
    assert_eq!(
        reason,
        "device gpu0-mps: it is a share of a card (MPS); VFIO passthrough needs an exclusive whole card"
    );
    let mut on_mig = request(vec![mig(0)]);
    on_mig.vfio_requested = true;
    let reason = refused(&on_mig, &CheckpointData::default()).unwrap();
    assert_eq!(
        reason,
        "device gpu0-mig-2g12gb-0: it is a MIG device; VFIO passthrough needs an exclusive whole card"
    );
}

#[test]
fn whole_card_and_mig_allocations_never_share_a_card() {
    let reason = refused(&request(vec![physical("gpu0")]), &recorded(vec![mig(2)])).unwrap();
    assert!(reason.contains("carries only MIG allocations"), "{reason}");
    assert!(
        reason.contains("device gpu0-mig-2g12gb-2 of claim ns/other"),
        "{reason}"
    );
    let reason = refused(
        &request(vec![mig(0)]),
        &recorded(vec![shared(SharingStrategy::Mps, "s")]),
    )
    .unwrap();
    assert!(reason.contains("carries only MIG allocations"), "{reason}");
    let reason = refused(&request(vec![physical("gpu0"), mig(0)]), &CheckpointData::default());
    assert!(reason.unwrap().contains("of the same claim"));
}

#[test]
fn overlapping_placements_are_refused_and_disjoint_ones_accepted() {
    let checkpoint = recorded(vec![mig(0)]);
    assert_eq!(refused(&request(vec![mig(2)]), &checkpoint), None);
    let mut overlapping = mig(1);
    overlapping.device = "gpu0-mig-2g12gb-1".into();
    let reason = refused(&request(vec![overlapping]), &checkpoint).unwrap();
    assert!(reason.contains("memory slices 1..3 and 0..2"), "{reason}");
}

#[test]
fn the_claims_own_record_is_not_a_conflict() {
    let mut checkpoint = recorded(vec![mig(0)]);
    let own = checkpoint.claims.remove("uid-other").unwrap();
    checkpoint.claims.insert("uid-train".into(), own);
    assert_eq!(refused(&request(vec![mig(0)]), &checkpoint), None);
}
