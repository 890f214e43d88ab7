//! NVLink queries (NVML's "NvLink Methods"): whether a link of a card is active and what its other
//! end is. `NVML_ERROR_NOT_SUPPORTED` for a card whose model has no NVLink and for a MIG device
//! (links belong to the card), `NVML_ERROR_INVALID_ARGUMENT` for a link the card does not have, as
//! the NVML reference lists them for `nvmlDeviceGetNvLinkState` and
//! `nvmlDeviceGetNvLinkRemotePciInfo_v2`. The remote end of an inactive link is not documented;
//! the mock answers `NVML_ERROR_INVALID_ARGUMENT` (no peer to describe).

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::lookup::{self, DeviceRef};
use super::{fill_chars, guard, out};
use crate::pci::PciBusId;
use crate::rc;

/// The card behind `device` and the link `link` of it, checked against its model.
fn link_of(device: nvmlDevice_t, link: c_uint) -> Result<(DeviceRef, usize), nvmlReturn_t> {
    let device = lookup::device(device)?;
    let links = device.card().model.nvlink_links;
    if device.mig.is_some() || links == 0 {
        return Err(rc::NOT_SUPPORTED);
    }
    if link >= links.min(NVML_NVLINK_MAX_LINKS) {
        return Err(rc::INVALID_ARGUMENT);
    }
    Ok((device, link as usize))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    is_active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let (device, link) = link_of(device, link)?;
        let active = link < device.card().nvlink_remotes.len();
        *unsafe { out(is_active) }? = if active {
            nvmlEnableState_enum_NVML_FEATURE_ENABLED
        } else {
            nvmlEnableState_enum_NVML_FEATURE_DISABLED
        };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let (device, link) = link_of(device, link)?;
        let remote: PciBusId = *device.card().nvlink_remotes.get(link).ok_or(rc::INVALID_ARGUMENT)?;
        // A card at the other end describes itself; an NVSwitch's ids are not modelled.
        let peer = device.session.machine.cards.iter().find(|c| c.pci_bus_id == remote);
        let info = unsafe { out(pci) }?;
        fill_chars(&mut info.busIdLegacy, &remote.nvml_legacy_bus_id());
        fill_chars(&mut info.busId, &remote.nvml_bus_id());
        info.domain = remote.domain;
        info.bus = remote.bus;
        info.device = remote.device;
        info.pciDeviceId = peer.map_or(0, |c| c.model.pci_device_id);
        info.pciSubSystemId = peer.map_or(0, |c| c.model.pci_sub_system_id);
        Ok(())
    })
}
