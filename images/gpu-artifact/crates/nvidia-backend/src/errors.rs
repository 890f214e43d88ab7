//! Turning NVML failures into vendor-port errors that say which card and
//! which call.

use gpu_vendor::{PciAddress, VendorError};
use nvml_wrapper::error::NvmlError;

use crate::raw::{self, RawError};

/// An error from `Nvml::init` (loading the library or talking to the driver).
pub fn from_init(error: NvmlError) -> VendorError {
    match error {
        NvmlError::LibloadingError(e) => VendorError::Unavailable { reason: e.to_string() },
        NvmlError::FailedToLoadSymbol(reason) => VendorError::Unavailable { reason },
        NvmlError::DriverNotLoaded => VendorError::DriverNotLoaded,
        NvmlError::NoPermission => VendorError::NoPermission("nvmlInit".to_owned()),
        other => VendorError::Failed {
            call: "nvmlInit_v2".to_owned(),
            reason: other.to_string(),
        },
    }
}

/// An error from a wrapper call about one card.
pub fn from_nvml(pci_address: &PciAddress, call: &str, error: NvmlError) -> VendorError {
    match error {
        NvmlError::FailedToLoadSymbol(reason) => VendorError::Unavailable {
            reason: format!("{call}: {reason}"),
        },
        NvmlError::DriverNotLoaded => VendorError::DriverNotLoaded,
        NvmlError::NotFound => VendorError::NotFound(*pci_address),
        NvmlError::NotSupported => VendorError::NotSupported {
            pci_address: *pci_address,
            what: call.to_owned(),
        },
        NvmlError::InUse => VendorError::InUse {
            pci_address: *pci_address,
            reason: call.to_owned(),
        },
        NvmlError::GpuLost => VendorError::DeviceLost(*pci_address),
        NvmlError::NoPermission => VendorError::NoPermission(format!("{call} on GPU {pci_address}")),
        other => VendorError::Failed {
            call: format!("{call} on GPU {pci_address}"),
            reason: other.to_string(),
        },
    }
}

/// An error from a raw call about one card; `context` says what was being
/// attempted ("profile 3g.20gb at placement 0:4").
pub fn from_raw(pci_address: &PciAddress, context: &str, error: RawError) -> VendorError {
    let call = error.call();
    let Some(code) = error.code() else {
        return VendorError::Unavailable {
            reason: format!("libnvidia-ml lacks {call}"),
        };
    };
    let reason = format!("{context} ({call})");
    match code {
        raw::INSUFFICIENT_RESOURCES => VendorError::InsufficientResources {
            pci_address: *pci_address,
            reason,
        },
        raw::IN_USE => VendorError::InUse {
            pci_address: *pci_address,
            reason,
        },
        raw::NOT_SUPPORTED => VendorError::NotSupported {
            pci_address: *pci_address,
            what: reason,
        },
        raw::GPU_IS_LOST => VendorError::DeviceLost(*pci_address),
        other => from_nvml(pci_address, &reason, NvmlError::from(other)),
    }
}
