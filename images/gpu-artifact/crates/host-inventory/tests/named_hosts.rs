//! Scans of the named fixture hosts: what the node agent sees on each kind
//! of hardware.

use host_fixtures::{DGX_A100_GPU_ADDRESSES, HostTree, NamedHost};
use host_inventory::{BoundDriver, GpuFilter, HostRoot, PciGpu, PciIds, Scan, VENDOR_AMD, VENDOR_NVIDIA, scan_gpus};

fn scan(host: &HostTree, filter: &GpuFilter) -> Scan {
    let root = HostRoot::new(host.root());
    let ids = PciIds::load(&root, &filter.vendors).expect("the fixture installs pci.ids");
    scan_gpus(&root, filter, Some(&ids))
}

#[test]
fn a30_pcie_is_one_fully_described_gpu() {
    let host = NamedHost::A30Pcie.build();
    let scan = scan(&host, &GpuFilter::nvidia());
    assert_eq!(scan.warnings, []);
    assert_eq!(
        scan.gpus,
        [PciGpu {
            address: "0000:01:00.0".into(),
            class_code: "0302".into(),
            class_name: Some("3D controller".into()),
            vendor_id: "10de".into(),
            vendor_name: Some("NVIDIA Corporation".into()),
            device_id: "20b7".into(),
            device_name: Some("GA100GL [A30 PCIe]".into()),
            subsystem_vendor_id: Some("10de".into()),
            subsystem_device_id: Some("1532".into()),
            subsystem_name: None,
            driver: Some(BoundDriver::Nvidia),
            numa_node: None,
            iommu_group: Some(13),
            index: 0,
            model_label: "a30-pcie".into(),
            pcie_root: Some("pci0000:00".into()),
        }]
    );
}

#[test]
fn a100_sxm_x8_indexes_follow_pci_address_order_across_numa_nodes() {
    let host = NamedHost::A100SxmX8.build();
    let scan = scan(&host, &GpuFilter::nvidia());
    assert_eq!(scan.warnings, []);
    let addresses: Vec<&str> = scan.gpus.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(addresses, DGX_A100_GPU_ADDRESSES);
    let indices: Vec<usize> = scan.gpus.iter().map(|g| g.index).collect();
    assert_eq!(indices, [0, 1, 2, 3, 4, 5, 6, 7]);
    let numa: Vec<Option<u32>> = scan.gpus.iter().map(|g| g.numa_node).collect();
    assert_eq!(
        numa,
        [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2), Some(3), Some(3)]
    );
    assert!(scan.gpus.iter().all(|g| g.model_label == "a100-sxm4-80gb"));
    assert!(
        scan.gpus
            .iter()
            .all(|g| g.device_name.as_deref() == Some("GA100 [A100 SXM4 80GB]"))
    );
    let groups: Vec<Option<u32>> = scan.gpus.iter().map(|g| g.iommu_group).collect();
    assert_eq!(groups, (40..48).map(Some).collect::<Vec<_>>());
}

#[test]
fn h100_pcie_is_labelled_from_its_pci_ids_name() {
    let host = NamedHost::H100Pcie.build();
    let scan = scan(&host, &GpuFilter::nvidia());
    assert_eq!(scan.gpus.len(), 1);
    let gpu = &scan.gpus[0];
    assert_eq!((gpu.address.as_str(), gpu.device_id.as_str()), ("0000:41:00.0", "2331"));
    assert_eq!(gpu.device_name.as_deref(), Some("GH100 [H100 PCIe]"));
    assert_eq!(gpu.model_label, "h100-pcie");
    assert_eq!(gpu.numa_node, Some(0));
}

#[test]
fn consumer_card_is_found_and_its_audio_function_is_not() {
    let host = NamedHost::ConsumerWithAudio.build();
    let scan = scan(&host, &GpuFilter::nvidia());
    assert_eq!(scan.warnings, []);
    assert_eq!(scan.gpus.len(), 1, "{:#?}", scan.gpus);
    let gpu = &scan.gpus[0];
    assert_eq!(gpu.address, "0000:01:00.0");
    assert_eq!(
        (gpu.class_code.as_str(), gpu.class_name.as_deref()),
        ("0300", Some("VGA compatible controller"))
    );
    assert_eq!(gpu.model_label, "geforce-rtx-4090");
    // The audio function shares the group: VFIO must hand over both.
    assert_eq!(gpu.iommu_group, Some(12));
    assert!(host.path("sys/kernel/iommu_groups/12/devices/0000:01:00.1").exists());
}

#[test]
fn non_nvidia_gpu_is_ignored_by_default_and_found_when_amd_is_asked_for() {
    let host = NamedHost::NonNvidiaGpu.build();
    assert_eq!(scan(&host, &GpuFilter::nvidia()), Scan::default());

    let amd = GpuFilter {
        vendors: vec![VENDOR_NVIDIA, VENDOR_AMD],
        ..GpuFilter::nvidia()
    };
    let scan = scan(&host, &amd);
    assert_eq!(scan.gpus.len(), 1);
    let gpu = &scan.gpus[0];
    assert_eq!((gpu.vendor_id.as_str(), gpu.device_id.as_str()), ("1002", "73bf"));
    assert_eq!(
        gpu.vendor_name.as_deref(),
        Some("Advanced Micro Devices, Inc. [AMD/ATI]")
    );
    assert_eq!(
        gpu.device_name.as_deref(),
        Some("Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]")
    );
    assert_eq!(gpu.subsystem_name.as_deref(), Some("Radeon RX 6900 XT"));
    assert_eq!(gpu.driver, Some(BoundDriver::Other("amdgpu".into())));
}

#[test]
fn gpus_in_a_vm_and_behind_unreadable_dmi_are_still_found() {
    for (named, address) in [
        (NamedHost::VmQemu, "0000:06:00.0"),
        (NamedHost::DmiUnreadable, "0000:01:00.0"),
    ] {
        let host = named.build();
        let scan = scan(&host, &GpuFilter::nvidia());
        let addresses: Vec<&str> = scan.gpus.iter().map(|g| g.address.as_str()).collect();
        assert_eq!(addresses, [address], "{}", named.name());
    }
}

#[test]
fn driver_type_follows_binding_unbinding_and_vfio() {
    let host = NamedHost::A30Pcie.build();
    let driver = |host: &HostTree| scan(host, &GpuFilter::nvidia()).gpus[0].driver.clone();
    assert_eq!(driver(&host), Some(BoundDriver::Nvidia));
    host.bind_driver("0000:01:00.0", "vfio-pci");
    assert_eq!(driver(&host), Some(BoundDriver::Vfio));
    host.unbind_driver("0000:01:00.0");
    assert_eq!(driver(&host), None);
    host.bind_driver("0000:01:00.0", "nouveau");
    assert_eq!(driver(&host), Some(BoundDriver::Other("nouveau".into())));
}
