//! MIG instance lifecycle against the mock, for every model: each profile at
//! each placement, overlap and invalid placements refused, destroy order.

mod support;

use gpu_vendor::{MigPlacement, MigProfile, VendorBackend, VendorError};
use mock_nvml::state::ProcessState;
use support::{MockNode, SINGLE_CARD_FIXTURES};

fn enabled_node(fixture: &str) -> (MockNode, nvidia_backend::NvidiaBackend) {
    let node = MockNode::from_fixture(fixture);
    let backend = node.backend();
    backend
        .set_mig_mode(&node.pci(0), true)
        .expect("enable MIG on an idle card");
    (node, backend)
}

fn profile<'a>(profiles: &'a [MigProfile], name: &str) -> &'a MigProfile {
    profiles
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no profile {name}"))
}

#[test]
fn every_profile_can_be_created_at_every_placement_and_destroyed() {
    for fixture in SINGLE_CARD_FIXTURES {
        let (node, backend) = enabled_node(fixture);
        let pci = node.pci(0);
        for profile in backend.mig_profiles(&pci).unwrap() {
            for placement in &profile.placements {
                let created = backend
                    .create_mig_device(&pci, profile.id, *placement)
                    .unwrap_or_else(|e| panic!("{fixture} {} at {placement:?}: {e}", profile.name));
                assert_eq!(created.placement, *placement, "{fixture} {}", profile.name);
                assert_eq!(created.profile_name, profile.name);
                assert_eq!(created.compute_instance_id, Some(0));
                let uuid = created.uuid.clone().expect("a MIG device has a UUID");
                assert!(uuid.starts_with("MIG-"), "{uuid}");

                let listed = backend.mig_instances(&pci).unwrap();
                assert_eq!(listed, vec![created.clone()], "{fixture} {}", profile.name);

                backend.destroy_mig_device(&pci, created.gpu_instance_id).unwrap();
                assert!(backend.mig_instances(&pci).unwrap().is_empty());
            }
        }
    }
}

#[test]
fn a_full_card_of_the_smallest_profile_fits_and_one_more_does_not() {
    for fixture in SINGLE_CARD_FIXTURES {
        let (node, backend) = enabled_node(fixture);
        let pci = node.pci(0);
        let profiles = backend.mig_profiles(&pci).unwrap();
        let smallest = profiles
            .iter()
            .find(|p| p.slice_count == 1 && p.max_instances > 1)
            .unwrap();
        let mut uuids = Vec::new();
        for placement in &smallest.placements {
            uuids.push(
                backend
                    .create_mig_device(&pci, smallest.id, *placement)
                    .unwrap()
                    .uuid
                    .unwrap(),
            );
        }
        assert_eq!(uuids.len() as u32, smallest.max_instances, "{fixture}");
        uuids.sort();
        uuids.dedup();
        assert_eq!(
            uuids.len() as u32,
            smallest.max_instances,
            "{fixture}: MIG UUIDs must be unique"
        );
        let whole = profiles.iter().max_by_key(|p| p.slice_count).unwrap();
        let refused = backend.create_mig_device(&pci, whole.id, whole.placements[0]);
        assert!(
            matches!(refused, Err(VendorError::InsufficientResources { .. })),
            "{fixture}: {refused:?}"
        );
    }
}

#[test]
fn overlapping_placements_are_refused() {
    let (node, backend) = enabled_node("a100-sxm4-40gb.yaml");
    let pci = node.pci(0);
    let profiles = backend.mig_profiles(&pci).unwrap();
    let half = profile(&profiles, "4g.20gb");
    let small = profile(&profiles, "1g.5gb");
    backend
        .create_mig_device(&pci, half.id, MigPlacement { start: 0, size: 4 })
        .unwrap();
    for start in 0..4 {
        let refused = backend.create_mig_device(&pci, small.id, MigPlacement { start, size: 1 });
        assert!(
            matches!(refused, Err(VendorError::InsufficientResources { .. })),
            "start {start}: {refused:?}"
        );
    }
    let fits = backend
        .create_mig_device(&pci, small.id, MigPlacement { start: 4, size: 1 })
        .unwrap();
    assert_eq!(fits.placement, MigPlacement { start: 4, size: 1 });
    assert_eq!(backend.mig_instances(&pci).unwrap().len(), 2);
}

#[test]
fn placements_the_profile_does_not_offer_are_refused() {
    let (node, backend) = enabled_node("h100-sxm5-80gb.yaml");
    let pci = node.pci(0);
    let profiles = backend.mig_profiles(&pci).unwrap();
    let double = profile(&profiles, "1g.20gb");
    // Real H100 places 1g.20gb on even starts with size 2 (the go-nvml mock's
    // {0..6}:1 is wrong); odd starts and size 1 are refused.
    for bad in [
        MigPlacement { start: 1, size: 2 },
        MigPlacement { start: 0, size: 1 },
        MigPlacement { start: 8, size: 2 },
    ] {
        let refused = backend.create_mig_device(&pci, double.id, bad);
        assert!(
            matches!(refused, Err(VendorError::InsufficientResources { .. })),
            "{bad:?}: {refused:?}"
        );
    }
    assert!(
        backend.mig_instances(&pci).unwrap().is_empty(),
        "a refused create leaves nothing behind"
    );
}

#[test]
fn media_engine_profiles_are_exclusive() {
    let (node, backend) = enabled_node("a30.yaml");
    let pci = node.pci(0);
    let profiles = backend.mig_profiles(&pci).unwrap();
    let small_me = profile(&profiles, "1g.6gb+me");
    let big_me = profile(&profiles, "2g.12gb+me");
    backend
        .create_mig_device(&pci, small_me.id, MigPlacement { start: 0, size: 1 })
        .unwrap();
    // The A30 has one OFA and one JPEG engine: a second +me profile cannot get them.
    let refused = backend.create_mig_device(&pci, big_me.id, MigPlacement { start: 2, size: 2 });
    assert!(
        matches!(refused, Err(VendorError::InsufficientResources { .. })),
        "{refused:?}"
    );
}

#[test]
fn unknown_profiles_are_not_supported() {
    let (node, backend) = enabled_node("a30.yaml");
    let refused = backend.create_mig_device(&node.pci(0), 19, MigPlacement { start: 0, size: 1 });
    assert!(matches!(refused, Err(VendorError::NotSupported { .. })), "{refused:?}");
}

#[test]
fn creating_without_mig_mode_is_not_supported() {
    let node = MockNode::from_fixture("a30.yaml");
    let backend = node.backend();
    let refused = backend.create_mig_device(&node.pci(0), 14, MigPlacement { start: 0, size: 1 });
    assert!(matches!(refused, Err(VendorError::NotSupported { .. })), "{refused:?}");
}

#[test]
fn compute_instances_must_go_before_their_gpu_instance() {
    let (node, backend) = enabled_node("h100-pcie.yaml");
    let pci = node.pci(0);
    let profiles = backend.mig_profiles(&pci).unwrap();
    let three = profile(&profiles, "3g.40gb");
    let created = backend
        .create_mig_device(&pci, three.id, MigPlacement { start: 4, size: 4 })
        .unwrap();
    let gi = created.gpu_instance_id;

    let refused = backend.destroy_gpu_instance(&pci, gi);
    assert!(matches!(refused, Err(VendorError::InUse { .. })), "{refused:?}");
    assert_eq!(backend.mig_instances(&pci).unwrap(), vec![created.clone()]);

    backend
        .destroy_compute_instance(&pci, gi, created.compute_instance_id.unwrap())
        .unwrap();
    let left = backend.mig_instances(&pci).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].compute_instance_id, left[0].uuid.as_ref()),
        (None, None),
        "GPU instance without compute instance"
    );

    backend.destroy_gpu_instance(&pci, gi).unwrap();
    assert!(backend.mig_instances(&pci).unwrap().is_empty());
    let gone = backend.destroy_gpu_instance(&pci, gi);
    assert!(matches!(gone, Err(VendorError::InstanceNotFound { .. })), "{gone:?}");
}

#[test]
fn a_mig_device_with_a_process_cannot_be_destroyed() {
    let (node, backend) = enabled_node("a100-sxm4-80gb.yaml");
    let pci = node.pci(0);
    let profiles = backend.mig_profiles(&pci).unwrap();
    let two = profile(&profiles, "2g.20gb");
    let created = backend
        .create_mig_device(&pci, two.id, MigPlacement { start: 2, size: 2 })
        .unwrap();
    let process = ProcessState {
        pid: 4242,
        used_gpu_memory_bytes: 1 << 30,
        gpu_instance_id: Some(created.gpu_instance_id),
        compute_instance_id: created.compute_instance_id,
        name: None,
    };
    node.state().add_process(&pci.to_string(), process).unwrap();

    let refused = backend.destroy_mig_device(&pci, created.gpu_instance_id);
    assert!(matches!(refused, Err(VendorError::InUse { .. })), "{refused:?}");
    assert_eq!(backend.mig_instances(&pci).unwrap(), vec![created.clone()]);

    node.state().remove_process(&pci.to_string(), 4242).unwrap();
    backend.destroy_mig_device(&pci, created.gpu_instance_id).unwrap();
    assert!(backend.mig_instances(&pci).unwrap().is_empty());
}

#[test]
fn a_restarted_backend_sees_the_instances_of_the_previous_one() {
    let node = MockNode::from_fixture("h100-sxm5-80gb.yaml");
    let pci = node.pci(0);
    let created = {
        let first = node.backend();
        first.set_mig_mode(&pci, true).unwrap();
        let profiles = first.mig_profiles(&pci).unwrap();
        let one = profile(&profiles, "1g.10gb");
        first
            .create_mig_device(&pci, one.id, MigPlacement { start: 3, size: 1 })
            .unwrap()
    };
    let second = node.backend();
    assert!(second.mig_mode(&pci).unwrap().unwrap().current.is_enabled());
    assert_eq!(second.mig_instances(&pci).unwrap(), vec![created.clone()]);
    second.destroy_mig_device(&pci, created.gpu_instance_id).unwrap();
    let snapshot = node.state().snapshot().unwrap();
    assert!(snapshot.gpus.values().all(|gpu| gpu.gpu_instances.is_empty()));
}
