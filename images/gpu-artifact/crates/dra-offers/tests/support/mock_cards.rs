//! Cards as the gpu-handler hands them to publication: real `GpuInventory` read through the NVIDIA
//! backend from the mock libnvidia-ml with a machine description of `testing/mock-nvml/machines`.
//! One source for the dra-offers tests and the e2e publication tests, which include this file by
//! path (it cannot live in mock-nvml: nvidia-backend's tests depend on mock-nvml).

use dra_offers::CardOffering;
use gpu_vendor::VendorBackend;
use mock_nvml::test_support::{MockInstall, machine_fixture};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};

/// Every card of `fixture`, indexed by sorted PCI address as the node agent does, named
/// `<node>-<index>-10de-<pci_device>` with the model label `device_label`.
pub fn mock_cards(fixture: &str, node: &str, pci_device: &str, device_label: &str) -> Vec<CardOffering> {
    let dir = tempfile::tempdir().expect("temp dir");
    let install = MockInstall::new(dir.path(), &machine_fixture(fixture)).expect("install the mock");
    let backend = NvidiaBackend::load(NvidiaBackendConfig {
        library_path: Some(install.library_path()),
    })
    .expect("the backend loads the mock");
    let mut addresses = backend.devices().expect("devices");
    addresses.sort();
    // The NVLink domains over every card, as the handler computes them (see `offer_feed`).
    let inventories: Vec<_> = addresses
        .iter()
        .map(|pci| backend.inventory(pci).expect("inventory"))
        .collect();
    let domains = dra_offers::nvlink_domains(&inventories.iter().collect::<Vec<_>>());
    inventories
        .into_iter()
        .enumerate()
        .map(|(index, inventory)| CardOffering {
            physical_gpu: format!("{node}-{index}-10de-{pci_device}"),
            index: index as u32,
            device_label: device_label.to_owned(),
            nvlink_domain: domains.get(&inventory.pci_address).cloned(),
            inventory,
            bare_metal: Some(true),
            taints: Vec::new(),
            // Two sockets of four cards each: a root complex and a NUMA node per socket.
            pcie_root: Some(if index < 4 { "pci0000:00" } else { "pci0000:80" }.to_owned()),
            numa_node: Some(index as i64 / 4),
        })
        .collect()
}
