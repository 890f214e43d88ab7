//! Inventory of every supported model, read through the backend from the
//! mock, compared with the machine description it was built from.

mod support;

use gpu_vendor::{MigState, VendorBackend};
use nvidia_backend::derive_profile_name;
use support::{MockNode, SINGLE_CARD_FIXTURES};

#[test]
fn inventory_reports_what_the_machine_describes() {
    for fixture in SINGLE_CARD_FIXTURES {
        let node = MockNode::from_fixture(fixture);
        let backend = node.backend();
        let pci = node.pci(0);
        let model = &node.card(0).model;

        let inventory = backend.inventory(&pci).unwrap_or_else(|e| panic!("{fixture}: {e}"));

        assert_eq!(inventory.pci_address, pci, "{fixture}");
        assert_eq!(inventory.uuid, node.card(0).uuid, "{fixture}");
        assert_eq!(inventory.product_name, model.name, "{fixture}");
        assert_eq!(inventory.memory_mib, model.memory_total_mib, "{fixture}");
        assert_eq!(
            inventory.board_part_number.as_deref(),
            Some(model.board_part_number.as_str())
        );
        let expected_arch = if model.architecture == 9 { "Hopper" } else { "Ampere" };
        assert_eq!(inventory.architecture.as_deref(), Some(expected_arch), "{fixture}");
        let cc = inventory.compute_capability.expect("compute capability");
        assert_eq!(
            [cc.major as i32, cc.minor as i32],
            model.compute_capability,
            "{fixture}"
        );
        assert_eq!(inventory.driver_version, node.machine.driver_version);
        assert_eq!(inventory.runtime_version.as_deref(), Some("13.0"));
        let power = inventory.power_limits.expect("power limits");
        assert_eq!(power.min_w * 1000, model.power.min_mw, "{fixture}");
        assert_eq!(power.max_w * 1000, model.power.max_mw, "{fixture}");
        assert_eq!(power.current_w.map(|w| w * 1000), Some(model.power.limit_mw));
        assert_eq!(power.enforced_w.map(|w| w * 1000), Some(model.power.enforced_mw));

        let mig = inventory.mig.expect("every fixture model supports MIG");
        assert_eq!(mig.mode.current, MigState::Disabled, "{fixture} boots with MIG off");
        assert_eq!(mig.mode.pending, MigState::Disabled);
        let spec = model.mig.as_ref().unwrap();
        let expected_slices = spec
            .gpu_instance_profiles
            .iter()
            .map(|p| p.placements.size)
            .max()
            .unwrap();
        assert_eq!(mig.memory_slices, expected_slices, "{fixture}");
        assert_eq!(mig.profiles.len(), spec.gpu_instance_profiles.len(), "{fixture}");
        for profile in &mig.profiles {
            let want = spec
                .profile_by_id(profile.id)
                .unwrap_or_else(|| panic!("{fixture}: id {}", profile.id));
            assert_eq!(profile.name, want.name, "{fixture}");
            assert_eq!(profile.memory_mib, want.memory_mib, "{fixture} {}", want.name);
            assert_eq!(profile.slice_count, want.slice_count, "{fixture} {}", want.name);
            assert_eq!(profile.max_instances, want.max_instances, "{fixture} {}", want.name);
            let e = profile.engines;
            assert_eq!(
                [
                    e.multiprocessors,
                    e.copy_engines,
                    e.decoders,
                    e.encoders,
                    e.jpeg_engines,
                    e.ofa_engines
                ],
                [
                    want.multiprocessors,
                    want.copy_engines,
                    want.decoders,
                    want.encoders,
                    want.jpeg,
                    want.ofa
                ],
                "{fixture} {}",
                want.name
            );
            let starts: Vec<u32> = profile.placements.iter().map(|p| p.start).collect();
            assert_eq!(starts, want.placements.starts, "{fixture} {}", want.name);
            assert!(profile.placements.iter().all(|p| p.size == want.placements.size));
        }
    }
}

/// With MIG off only the v1 profile call answers and names are derived from
/// memory (go-nvlib's rule); with MIG on NVML's own names are used. Both must
/// agree, or offers would change names when the mode flips.
#[test]
fn profile_names_agree_whether_mig_is_on_or_off() {
    for fixture in SINGLE_CARD_FIXTURES {
        let node = MockNode::from_fixture(fixture);
        let backend = node.backend();
        let pci = node.pci(0);
        let derived: Vec<String> = backend
            .mig_profiles(&pci)
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        backend.set_mig_mode(&pci, true).unwrap();
        let reported: Vec<String> = backend
            .mig_profiles(&pci)
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(derived, reported, "{fixture}");
        let model = &node.card(0).model;
        for spec in &model.mig.as_ref().unwrap().gpu_instance_profiles {
            let name = derive_profile_name(spec.index, spec.memory_mib, model.memory_total_mib);
            assert_eq!(
                name.as_deref(),
                Some(spec.name.as_str()),
                "{fixture}: fixture memory gives another name"
            );
        }
    }
}

#[test]
fn published_profile_ids_and_names_of_the_reference_tables() {
    // Spot checks against mig-profiles.md section 4 (smi IDs are what
    // creation calls take, not NVML indices).
    let expected = [
        (
            "a30.yaml",
            vec![
                (14, "1g.6gb"),
                (21, "1g.6gb+me"),
                (5, "2g.12gb"),
                (6, "2g.12gb+me"),
                (0, "4g.24gb"),
            ],
        ),
        (
            "h100-sxm5-80gb.yaml",
            vec![
                (19, "1g.10gb"),
                (14, "2g.20gb"),
                (9, "3g.40gb"),
                (5, "4g.40gb"),
                (0, "7g.80gb"),
                (20, "1g.10gb+me"),
                (15, "1g.20gb"),
            ],
        ),
    ];
    for (fixture, wanted) in expected {
        let node = MockNode::from_fixture(fixture);
        let profiles = node.backend().mig_profiles(&node.pci(0)).unwrap();
        for (id, name) in wanted {
            let profile = profiles
                .iter()
                .find(|p| p.id == id)
                .unwrap_or_else(|| panic!("{fixture}: no id {id}"));
            assert_eq!(profile.name, name, "{fixture}");
        }
    }
}

#[test]
fn a_vendor_prefix_on_profile_names_is_stripped() {
    let node = MockNode::from_yaml(
        "include: [FIXTURES/a30.yaml]\nprofileNamePrefix: \"MIG \"\ngpus:\n  - { pciBusId: \"0000:3b:00.0\", model: a30-24gb, uuid: GPU-x, migEnabled: true }\n",
    );
    let names: Vec<String> = node
        .backend()
        .mig_profiles(&node.pci(0))
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["1g.6gb", "2g.12gb", "4g.24gb", "1g.6gb+me", "2g.12gb+me"]);
}

#[test]
fn every_card_of_a_multi_card_node_is_listed_in_pci_order() {
    let node = MockNode::from_fixture("h100-sxm5-80gb-x8.yaml");
    let backend = node.backend();
    let devices = backend.devices().unwrap();
    let expected: Vec<_> = (0..8).map(|i| node.pci(i)).collect();
    assert_eq!(devices, expected);
    let uuids: Vec<String> = devices.iter().map(|pci| backend.inventory(pci).unwrap().uuid).collect();
    let expected_uuids: Vec<String> = node.machine.cards.iter().map(|c| c.uuid.clone()).collect();
    assert_eq!(uuids, expected_uuids);
}

#[test]
fn a_card_that_booted_with_mig_on_reports_it() {
    let node = MockNode::from_fixture("a30-x2.yaml");
    let backend = node.backend();
    let off = backend.mig_mode(&node.pci(0)).unwrap().unwrap();
    let on = backend.mig_mode(&node.pci(1)).unwrap().unwrap();
    assert_eq!(off.current, MigState::Disabled);
    assert_eq!(on.current, MigState::Enabled);
    assert!(backend.mig_instances(&node.pci(1)).unwrap().is_empty());
}

#[test]
fn nvlink_reach_is_read_from_the_active_links() {
    // HGX H100: every card's 18 links reach the four NVSwitches.
    let node = MockNode::from_fixture("h100-sxm5-80gb-x8.yaml");
    let backend = node.backend();
    let switches: Vec<gpu_vendor::PciAddress> = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    for i in 0..8 {
        assert_eq!(
            backend.inventory(&node.pci(i)).unwrap().nvlink_remotes,
            switches,
            "card {i}"
        );
    }
    // PCIe cards without a bridge: links exist but none is active.
    for fixture in SINGLE_CARD_FIXTURES {
        let node = MockNode::from_fixture(fixture);
        let inventory = node.backend().inventory(&node.pci(0)).unwrap();
        assert_eq!(inventory.nvlink_remotes, [], "{fixture}");
    }
    // Two H100 PCIe joined by a bridge: each reaches the other.
    let node = MockNode::from_yaml(
        r#"include: [FIXTURES/h100-pcie.yaml]
gpus:
  - { pciBusId: "0000:41:00.0", model: h100-pcie-80gb, uuid: "GPU-a", nvlinks: [{ remote: "0000:c1:00.0", links: 12 }] }
  - { pciBusId: "0000:c1:00.0", model: h100-pcie-80gb, uuid: "GPU-b", nvlinks: [{ remote: "0000:41:00.0", links: 12 }] }
"#,
    );
    let backend = node.backend();
    assert_eq!(backend.inventory(&node.pci(0)).unwrap().nvlink_remotes, [node.pci(1)]);
    assert_eq!(backend.inventory(&node.pci(1)).unwrap().nvlink_remotes, [node.pci(0)]);
}
