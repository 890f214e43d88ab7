//! What `nvidia-smi -L` and `nvidia-smi` print, read through NVML.

use std::fmt::Write as _;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

/// The library every NVML consumer loads (the soname; the dynamic linker finds it).
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

pub fn nvml() -> Result<Nvml, NvmlError> {
    Nvml::builder().lib_path(NVML_LIBRARY.as_ref()).init()
}

/// `nvidia-smi -L`: one line per GPU the process can open, each followed by its MIG devices:
/// `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)` and `  MIG 1g.10gb     Device  0: (UUID: MIG-…)`.
pub fn list(nvml: &Nvml) -> Result<String, NvmlError> {
    let mut out = String::new();
    for index in 0..nvml.device_count()? {
        let device = nvml.device_by_index(index)?;
        let _ = writeln!(out, "GPU {index}: {} (UUID: {})", device.name()?, device.uuid()?);
        if !device.mig_is_mig_device_handle()? && matches!(device.mig_mode(), Ok(mode) if mode.current == 1) {
            for mig_index in 0..device.mig_device_count()? {
                let Ok(mig) = device.mig_device_by_index(mig_index) else {
                    break;
                };
                let name = mig.name()?;
                let profile = name.rsplit_once("MIG ").map_or(name.as_str(), |(_, p)| p);
                let _ = writeln!(
                    out,
                    "  MIG {profile:<11} Device {mig_index:>2}: (UUID: {})",
                    mig.uuid()?
                );
            }
        }
    }
    Ok(out)
}

/// `nvidia-smi` without arguments: the driver and CUDA versions and a line per GPU.
pub fn summary(nvml: &Nvml) -> Result<String, NvmlError> {
    let cuda = nvml.sys_cuda_driver_version()?;
    let mut out = format!(
        "NVIDIA-SMI stand-in    Driver Version: {}    CUDA Version: {}.{}\n",
        nvml.sys_driver_version()?,
        cuda / 1000,
        (cuda % 1000) / 10
    );
    for index in 0..nvml.device_count()? {
        let device = nvml.device_by_index(index)?;
        let memory = device.memory_info()?;
        let _ = writeln!(
            out,
            "| {index:>3}  {:<28} | {} | {:>6}MiB |",
            device.name()?,
            device.pci_info()?.bus_id,
            memory.total / (1024 * 1024)
        );
    }
    Ok(out)
}
