//! The state file: shared by processes, safe under concurrent updates.

use mock_nvml::state::ProcessState;
use mock_nvml::test_support::{MockStateFile, machine_fixture};

#[test]
fn concurrent_updates_are_all_kept() {
    let dir = tempfile::TempDir::new().unwrap();
    let state = MockStateFile::open(
        &machine_fixture("h100-sxm5-80gb-x8.yaml"),
        &dir.path().join("state.json"),
    )
    .unwrap();
    let writers: Vec<_> = (0..8u32)
        .map(|writer| {
            let state = state.clone();
            std::thread::spawn(move || {
                for n in 0..10u32 {
                    let process = ProcessState {
                        pid: writer * 100 + n,
                        used_gpu_memory_bytes: 0,
                        gpu_instance_id: None,
                        compute_instance_id: None,
                        name: None,
                    };
                    state.add_process("0000:18:00.0", process).unwrap();
                    state.inject_xid("0000:2a:00.0", 48, None, None).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let snapshot = state.snapshot().unwrap();
    let card: mock_nvml::pci::PciBusId = "0000:18:00.0".parse().unwrap();
    assert_eq!(snapshot.gpus[&card].processes.len(), 80);
    let mut seqs: Vec<u64> = snapshot.xid_events.iter().map(|e| e.seq).collect();
    seqs.dedup();
    assert_eq!(
        seqs,
        (1..=80).collect::<Vec<_>>(),
        "every Xid gets its own sequence number"
    );
}

#[test]
fn unknown_cards_are_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let state = MockStateFile::open(&machine_fixture("a30.yaml"), &dir.path().join("state.json")).unwrap();
    assert!(state.inject_xid("0000:99:00.0", 79, None, None).is_err());
    assert!(state.snapshot().unwrap().xid_events.is_empty());
}

#[test]
fn every_fixture_loads_with_consistent_profile_tables() {
    let fixtures = std::fs::read_dir(mock_nvml::test_support::machines_dir()).unwrap();
    let mut loaded = 0;
    for entry in fixtures {
        let path = entry.unwrap().path();
        let machine = mock_nvml::machine::Machine::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!machine.cards.is_empty(), "{}", path.display());
        for card in &machine.cards {
            assert!(!card.model.source.is_empty());
            let mig = card.model.mig.as_ref().expect("all fixture models have MIG");
            let slices = mig.full_profile().unwrap().placements.size;
            let mut ids = std::collections::BTreeSet::new();
            for profile in &mig.gpu_instance_profiles {
                assert!(
                    ids.insert(profile.id),
                    "{}: duplicate id {}",
                    path.display(),
                    profile.id
                );
                assert!(profile.memory_mib <= card.model.memory_total_mib, "{}", profile.name);
                assert!(profile.slice_count <= mig.compute_slices, "{}", profile.name);
                assert!(
                    profile.placements.starts.len() as u32 >= profile.max_instances,
                    "{}",
                    profile.name
                );
                for start in &profile.placements.starts {
                    assert!(
                        start + profile.placements.size <= slices,
                        "{}: placement past the card",
                        profile.name
                    );
                }
            }
        }
        loaded += 1;
    }
    assert!(loaded >= 7);
}
