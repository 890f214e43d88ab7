//! Where a card's NVLinks lead: for each link NVML has (up to `NVML_NVLINK_MAX_LINKS`), whether it
//! is active (`nvmlDeviceGetNvLinkState`) and, if so, the PCI address of its other end
//! (`nvmlDeviceGetNvLinkRemotePciInfo_v2`): another card, or an NVSwitch through which the card
//! reaches every card on that switch. A card without NVLink answers `NVML_ERROR_NOT_SUPPORTED`
//! and a link it does not have `NVML_ERROR_INVALID_ARGUMENT` (the NVML reference, NvLink
//! Methods): both end the reading. Which remote is a card and which a switch is left to the
//! caller, who knows the node's cards: nvml-wrapper 0.13's `NvLink::remote_device_type` writes
//! NVML's answer into a temporary and always reports `Unknown`.

use gpu_vendor::{PciAddress, VendorError};
use nvml_wrapper::Device;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::NVML_NVLINK_MAX_LINKS;

use crate::errors::from_nvml;

/// The distinct remote ends of the card's active links, in address order.
pub(crate) fn remotes(device: &Device<'_>, pci_address: &PciAddress) -> Result<Vec<PciAddress>, VendorError> {
    let mut remotes = Vec::new();
    for link in 0..NVML_NVLINK_MAX_LINKS {
        let nvlink = device.link_wrapper_for(link);
        match nvlink.is_active() {
            Ok(true) => {}
            Ok(false) => continue,
            Err(NvmlError::NotSupported | NvmlError::InvalidArg | NvmlError::FailedToLoadSymbol(_)) => break,
            Err(e) => return Err(from_nvml(pci_address, "nvmlDeviceGetNvLinkState", e)),
        }
        let call = "nvmlDeviceGetNvLinkRemotePciInfo_v2";
        let remote = nvlink.remote_pci_info().map_err(|e| from_nvml(pci_address, call, e))?;
        let address = remote
            .bus_id
            .parse()
            .map_err(|e: gpu_vendor::PciAddressError| VendorError::Failed {
                call: call.to_owned(),
                reason: e.to_string(),
            })?;
        remotes.push(address);
    }
    remotes.sort();
    remotes.dedup();
    Ok(remotes)
}
