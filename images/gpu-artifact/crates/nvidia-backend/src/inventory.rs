//! Identity, versions, memory, power, NVLink reach and processes of a card, read through
//! nvml-wrapper.

use gpu_vendor::{ComputeCapability, GpuInventory, GpuProcess, MigCapabilities, PciAddress, PowerLimits, VendorError};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::errors::from_nvml;
use crate::mig_profiles;

const MIB: u64 = 1024 * 1024;

/// PCI addresses of every card NVML enumerates.
pub fn pci_addresses(nvml: &Nvml) -> Result<Vec<PciAddress>, VendorError> {
    let system_error = |call: &str, e: NvmlError| match e {
        NvmlError::DriverNotLoaded => VendorError::DriverNotLoaded,
        other => VendorError::Failed {
            call: call.to_owned(),
            reason: other.to_string(),
        },
    };
    let count = nvml
        .device_count()
        .map_err(|e| system_error("nvmlDeviceGetCount_v2", e))?;
    (0..count)
        .map(|index| {
            let device = nvml
                .device_by_index(index)
                .map_err(|e| system_error("nvmlDeviceGetHandleByIndex_v2", e))?;
            let bus_id = device
                .pci_info()
                .map_err(|e| system_error("nvmlDeviceGetPciInfo_v3", e))?
                .bus_id;
            bus_id
                .parse()
                .map_err(|e: gpu_vendor::PciAddressError| VendorError::Failed {
                    call: "nvmlDeviceGetPciInfo_v3".to_owned(),
                    reason: e.to_string(),
                })
        })
        .collect()
}

/// `None` for a value the card does not report; other failures are errors.
pub(crate) fn optional<T>(
    pci_address: &PciAddress,
    call: &str,
    result: Result<T, NvmlError>,
) -> Result<Option<T>, VendorError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(from_nvml(pci_address, call, e)),
    }
}

pub fn read(nvml: &Nvml, device: &Device<'_>, pci_address: &PciAddress) -> Result<GpuInventory, VendorError> {
    let uuid = device
        .uuid()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetUUID", e))?;
    let product_name = device
        .name()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetName", e))?;
    let memory = device
        .memory_info()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetMemoryInfo_v2", e))?;
    let driver_version = nvml
        .sys_driver_version()
        .map_err(|e| from_nvml(pci_address, "nvmlSystemGetDriverVersion", e))?;
    let architecture = optional(pci_address, "nvmlDeviceGetArchitecture", device.architecture())?;
    let board_part_number = optional(pci_address, "nvmlDeviceGetBoardPartNumber", device.board_part_number())?;
    let compute_capability = optional(
        pci_address,
        "nvmlDeviceGetCudaComputeCapability",
        device.cuda_compute_capability(),
    )?
    .map(|cc| ComputeCapability {
        major: cc.major.max(0) as u32,
        minor: cc.minor.max(0) as u32,
    });
    // NVML encodes the CUDA version as major*1000 + minor*10.
    let runtime_version = optional(
        pci_address,
        "nvmlSystemGetCudaDriverVersion_v2",
        nvml.sys_cuda_driver_version(),
    )?
    .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let power_limits = power_limits(device, pci_address)?;
    let nvlink_remotes = crate::nvlink::remotes(device, pci_address)?;
    let mig = match mig_profiles::mode(device, pci_address)? {
        None => None,
        Some(mode) => {
            let profiles = mig_profiles::read(nvml, device, pci_address)?;
            let memory_slices = profiles
                .iter()
                .flat_map(|p| p.placements.iter().map(|pl| pl.end()))
                .max()
                .unwrap_or(0);
            Some(MigCapabilities {
                mode,
                memory_slices,
                profiles,
            })
        }
    };
    Ok(GpuInventory {
        pci_address: *pci_address,
        uuid,
        product_name,
        architecture: architecture.map(|a| a.to_string()),
        board_part_number,
        memory_mib: memory.total / MIB,
        compute_capability,
        driver_version,
        runtime_version,
        power_limits,
        mig,
        nvlink_remotes,
    })
}

/// NVML reports milliwatts; the status wants watts.
fn power_limits(device: &Device<'_>, pci_address: &PciAddress) -> Result<Option<PowerLimits>, VendorError> {
    let Some(constraints) = optional(
        pci_address,
        "nvmlDeviceGetPowerManagementLimitConstraints",
        device.power_management_limit_constraints(),
    )?
    else {
        return Ok(None);
    };
    let current = optional(
        pci_address,
        "nvmlDeviceGetPowerManagementLimit",
        device.power_management_limit(),
    )?;
    let enforced = optional(
        pci_address,
        "nvmlDeviceGetEnforcedPowerLimit",
        device.enforced_power_limit(),
    )?;
    Ok(Some(PowerLimits {
        min_w: PowerLimits::milliwatts_to_watts(constraints.min_limit),
        max_w: PowerLimits::milliwatts_to_watts(constraints.max_limit),
        current_w: current.map(PowerLimits::milliwatts_to_watts),
        enforced_w: enforced.map(PowerLimits::milliwatts_to_watts),
    }))
}

pub fn processes(device: &Device<'_>, pci_address: &PciAddress) -> Result<Vec<GpuProcess>, VendorError> {
    let processes = device
        .running_compute_processes()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetComputeRunningProcesses_v3", e))?;
    Ok(processes
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            used_memory_bytes: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            },
            gpu_instance_id: p.gpu_instance_id,
            compute_instance_id: p.compute_instance_id,
            name: None,
        })
        .collect())
}
