//! Whether the opaque config that applies to a request fits the device allocated for it: a
//! `GpuConfig` for a whole card, a `MigDeviceConfig` for a MIG device, a `VfioDeviceConfig` only for
//! an exclusive whole card. A shared offer was published for one strategy, so a `GpuConfig` on it
//! must not name another (and an exclusive offer is not shared by a config either: sharing is
//! chosen by allocating the shared offer).

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{GpuConfig, OpaqueConfig, SharingStrategy};

/// Why `config` cannot be applied to `device`, or `Ok`.
pub(super) fn check_fit(config: &OpaqueConfig, device: &str, target: &OfferedDevice) -> Result<(), String> {
    let offer_strategy = match target {
        OfferedDevice::Physical { .. } => SharingStrategy::Exclusive,
        OfferedDevice::SharedPhysical { strategy, .. } => *strategy,
        OfferedDevice::Mig { .. } => {
            return match config {
                OpaqueConfig::MigDeviceConfig(_) => Ok(()),
                OpaqueConfig::GpuConfig(_) => Err(format!(
                    "{device} is a MIG device; GpuConfig applies to whole cards, use MigDeviceConfig"
                )),
                OpaqueConfig::VfioDeviceConfig(_) => Err(format!(
                    "{device} is a MIG device; VfioDeviceConfig needs an exclusive whole card"
                )),
            };
        }
    };
    match config {
        OpaqueConfig::GpuConfig(GpuConfig { sharing }) => {
            let asked = sharing.as_ref().map_or(offer_strategy, |sharing| sharing.strategy);
            if asked == offer_strategy {
                return Ok(());
            }
            Err(format!(
                "sharing.strategy {} differs from the strategy of {device}, {}; allocate a device whose \
                 gpu.deckhouse.io sharing attribute is {}",
                asked.as_str(),
                offer_strategy.as_str(),
                asked.as_str()
            ))
        }
        OpaqueConfig::MigDeviceConfig(_) => Err(format!(
            "{device} is a whole card; MigDeviceConfig applies to MIG devices, use GpuConfig"
        )),
        OpaqueConfig::VfioDeviceConfig(_) if offer_strategy == SharingStrategy::Exclusive => Ok(()),
        OpaqueConfig::VfioDeviceConfig(_) => Err(format!(
            "{device} is shared ({}); VfioDeviceConfig needs an exclusive whole card",
            offer_strategy.as_str()
        )),
    }
}
