//! A whole card handed to vfio-pci for a virtual machine: which functions
//! move (the card's own: itself and its vendor's audio, USB and serial
//! functions of its slot; see `host_inventory::vfio::split_group`), moving them
//! and giving them back, and the QEMU hook payload of the claim. A card whose
//! IOMMU group holds any other device is refused: passthrough would take that
//! device (a network card, a disk) from the host.

use std::time::Duration;

use host_inventory::vfio::{self, PciFunction, VfioError};
use host_inventory::{HostRoot, PciIds};
use serde_json::json;

use crate::checkpoint::{VfioFunctionRecord, VfioRecord};
use crate::request::{AllocatedDevice, PrepareRequest};

/// What passthrough of a card would do.
pub(crate) enum PassthroughPlan {
    /// The card's IOMMU group and what each of its own functions is bound to now.
    Ready(VfioRecord),
    /// The group holds devices that are not the card's: their description.
    Refused { iommu_group: u32, foreign: String },
}

/// The plan for the card at `card`.
pub(crate) fn plan_passthrough(root: &HostRoot, card: &str) -> Result<PassthroughPlan, VfioError> {
    let iommu_group = vfio::iommu_group(root, card)?;
    let card_function = vfio::read_function(root, card)?;
    let split = vfio::split_group(&card_function, vfio::group_functions(root, iommu_group)?);
    if !split.foreign.is_empty() {
        return Ok(PassthroughPlan::Refused {
            iommu_group,
            foreign: describe(root, &split.foreign),
        });
    }
    let functions = split
        .own
        .into_iter()
        .map(|function| VfioFunctionRecord {
            address: function.address,
            original_driver: function.driver,
        })
        .collect();
    Ok(PassthroughPlan::Ready(VfioRecord { iommu_group, functions }))
}

/// `0000:02:00.0 Intel Corporation I350 Gigabit Network Connection (8086:1521, Ethernet controller,
/// bound to igb)`; names from the host's pci.ids where it has them.
fn describe(root: &HostRoot, functions: &[PciFunction]) -> String {
    let vendors: Vec<u16> = functions.iter().map(|f| f.vendor_id).collect();
    let names = PciIds::load(root, &vendors).ok();
    let listed: Vec<String> = functions
        .iter()
        .map(|f| {
            let ids = format!("{:04x}:{:04x}", f.vendor_id, f.device_id);
            let class = u16::try_from(f.class >> 8).unwrap_or_default();
            let name = names.as_ref().and_then(|n| {
                let vendor = n.vendor_name(f.vendor_id)?;
                Some(match n.device_name(f.vendor_id, f.device_id) {
                    Some(device) => format!(" {vendor} {device}"),
                    None => format!(" {vendor}"),
                })
            });
            let class_name = names
                .as_ref()
                .and_then(|n| n.class_name(class))
                .map_or_else(|| format!("class {:06x}", f.class), str::to_owned);
            let driver = f
                .driver
                .as_deref()
                .map_or("unbound".to_owned(), |d| format!("bound to {d}"));
            format!(
                "{}{} ({ids}, {class_name}, {driver})",
                f.address,
                name.unwrap_or_default()
            )
        })
        .collect();
    listed.join(", ")
}

/// Binds every recorded function back to the driver it had (in reverse
/// order); goes on after a failure and returns the first one.
pub(crate) fn give_back(root: &HostRoot, record: &VfioRecord, timeout: Duration) -> Result<(), VfioError> {
    let mut first_error = None;
    for function in record.functions.iter().rev() {
        let original = function.original_driver.as_deref();
        match vfio::restore_driver(root, &function.address, original, timeout) {
            Ok(()) => {
                tracing::info!(function = %function.address, driver = ?original, "gave the function back to its driver")
            }
            Err(error) => {
                tracing::warn!(function = %function.address, %error, "cannot give the function back to its driver");
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The QEMU hook payload (see the crate docs for the format) of the claim's
/// devices on vfio-pci, each with its record.
pub(crate) fn hook_payload(
    root: &HostRoot,
    request: &PrepareRequest,
    devices: &[(&AllocatedDevice, &VfioRecord)],
) -> Result<serde_json::Value, VfioError> {
    let mut listed = Vec::new();
    for (device, record) in devices {
        let card = device.target.pci_address().to_string();
        let function = vfio::read_function(root, &card)?;
        let functions: Vec<&str> = record.functions.iter().map(|f| f.address.as_str()).collect();
        listed.push(json!({
            "request": device.request,
            "device": device.device,
            "pciAddress": card,
            "iommuGroup": record.iommu_group,
            "vendorId": format!("{:04x}", function.vendor_id),
            "deviceId": format!("{:04x}", function.device_id),
            "functions": functions,
        }));
    }
    let claim = &request.claim;
    let pods: Vec<serde_json::Value> = request
        .pods
        .iter()
        .map(|pod| json!({ "namespace": claim.namespace, "name": pod.name, "uid": pod.uid }))
        .collect();
    Ok(json!({
        "claim": { "namespace": claim.namespace, "name": claim.name, "uid": claim.uid },
        "pods": pods,
        "devices": listed,
    }))
}
