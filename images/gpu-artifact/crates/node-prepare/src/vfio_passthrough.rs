//! A whole card handed to vfio-pci for a virtual machine: which functions
//! move (every function of the card's IOMMU group but bridges), moving them
//! and giving them back, and the QEMU hook payload of the claim.

use std::time::Duration;

use host_inventory::HostRoot;
use host_inventory::vfio::{self, VfioError};
use serde_json::json;

use crate::checkpoint::{VfioFunctionRecord, VfioRecord};
use crate::fault_point::fault_point;
use crate::request::{AllocatedDevice, PrepareRequest};

/// The card's IOMMU group and what each of its functions is bound to now.
pub(crate) fn plan_passthrough(root: &HostRoot, card: &str) -> Result<VfioRecord, VfioError> {
    let iommu_group = vfio::iommu_group(root, card)?;
    let functions = vfio::group_functions(root, iommu_group)?
        .into_iter()
        .filter(|function| !function.is_bridge())
        .map(|function| VfioFunctionRecord {
            address: function.address,
            original_driver: function.driver,
        })
        .collect();
    Ok(VfioRecord { iommu_group, functions })
}

/// Moves every recorded function to vfio-pci and checks that QEMU can open the group.
pub(crate) fn move_to_vfio(root: &HostRoot, record: &VfioRecord, timeout: Duration) -> Result<(), VfioError> {
    for function in &record.functions {
        vfio::bind_to_vfio(root, &function.address, timeout)?;
        fault_point("after-vfio-function-moved");
    }
    vfio::check_group_viable(root, record.iommu_group)
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
