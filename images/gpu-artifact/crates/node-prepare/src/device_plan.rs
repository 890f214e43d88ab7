//! What each allocated device asks of its card, from its offer, its opaque
//! config and the Pod annotation: shared how (the card's [`CardSharing`]), or
//! handed to vfio-pci. Pure; a device whose offer and config disagree is
//! refused here, naming both.

use std::fmt;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{GpuConfig, MigDeviceConfig, OpaqueConfig, SharingStrategy, TimeSliceInterval};

use crate::checkpoint::CardSharing;
use crate::mps_memory_limit;
use crate::request::{AllocatedDevice, PrepareRequest};

/// What the pipeline does for one device beyond making it exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DevicePlan {
    /// Set for a share: how the card is shared.
    pub sharing: Option<CardSharing>,
    /// The MPS share's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
    pub active_thread_percentage: Option<u32>,
    /// The MPS share's `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` on its card, in MiB: the memory it
    /// consumed, when it asked for some.
    pub pinned_memory_mib: Option<u64>,
    /// The whole card goes to vfio-pci.
    pub vfio: bool,
}

/// The plan of every device of the request, in order; the reason of the first device that cannot be planned.
pub(crate) fn plan_devices(request: &PrepareRequest) -> Result<Vec<DevicePlan>, String> {
    request
        .devices
        .iter()
        .map(|device| {
            plan_device(device, request.vfio_requested).map_err(|reason| format!("device {}: {reason}", device.device))
        })
        .collect()
}

fn plan_device(device: &AllocatedDevice, vfio_annotation: bool) -> Result<DevicePlan, String> {
    let config = device.config.as_ref();
    let vfio_config = matches!(config, Some(OpaqueConfig::VfioDeviceConfig(_)));
    let vfio = vfio_annotation || vfio_config;
    if device.admin_access {
        // The card stays as its holders have it: no sharing, MIG or driver change for an admin.
        if vfio {
            return Err(
                "it is allocated with adminAccess, which reaches the card without holding it; \
                 VFIO passthrough needs the card held exclusively"
                    .to_owned(),
            );
        }
        return Ok(DevicePlan::default());
    }
    match &device.target {
        OfferedDevice::SharedPhysical { strategy, .. } => {
            if vfio {
                return Err(format!(
                    "it is a share of a card ({}); VFIO passthrough needs an exclusive whole card",
                    strategy.as_str()
                ));
            }
            plan_share(device, *strategy)
        }
        OfferedDevice::Physical { .. } if vfio && !device.vfio_allowed => {
            let asked_by = if vfio_config {
                "the claim's VfioDeviceConfig"
            } else {
                "the Pod annotation gpu.deckhouse.io/vfio"
            };
            Err(format!(
                "VFIO passthrough (asked by {asked_by}) is an admin's decision: it is allowed only through a \
                 DeviceClass that carries a VfioDeviceConfig, and the class of request {} does not",
                device.request
            ))
        }
        OfferedDevice::Physical { .. } => match config {
            None | Some(OpaqueConfig::VfioDeviceConfig(_)) => Ok(DevicePlan {
                vfio,
                ..DevicePlan::default()
            }),
            Some(OpaqueConfig::GpuConfig(GpuConfig { sharing })) => match sharing.as_ref().map(|s| s.strategy) {
                None | Some(SharingStrategy::Exclusive) => Ok(DevicePlan {
                    vfio,
                    ..DevicePlan::default()
                }),
                Some(strategy) => Err(format!(
                    "it is allocated exclusively, but its config asks for sharing strategy {}; \
                     a shared card is requested through the card's {} offer",
                    strategy.as_str(),
                    strategy.as_str()
                )),
            },
            Some(OpaqueConfig::MigDeviceConfig(_)) => {
                Err("it is a whole card; a MigDeviceConfig applies to MIG devices only".to_owned())
            }
        },
        OfferedDevice::Mig { .. } => {
            if vfio {
                return Err("it is a MIG device; VFIO passthrough needs an exclusive whole card".to_owned());
            }
            match config {
                None => Ok(DevicePlan::default()),
                Some(OpaqueConfig::MigDeviceConfig(MigDeviceConfig { sharing })) => {
                    match sharing.as_ref().map(|s| s.strategy) {
                        None | Some(SharingStrategy::Exclusive) => Ok(DevicePlan::default()),
                        Some(strategy) => Err(format!(
                            "sharing a MIG device ({}) is not supported on this node; use Exclusive",
                            strategy.as_str()
                        )),
                    }
                }
                Some(_) => Err("it is a MIG device; a GpuConfig applies to whole cards only".to_owned()),
            }
        }
    }
}

fn plan_share(device: &AllocatedDevice, strategy: SharingStrategy) -> Result<DevicePlan, String> {
    let sharing = match device.config.as_ref() {
        None => None,
        Some(OpaqueConfig::GpuConfig(GpuConfig { sharing })) => sharing.as_ref(),
        Some(OpaqueConfig::MigDeviceConfig(_)) => {
            return Err("it is a whole card; a MigDeviceConfig applies to MIG devices only".to_owned());
        }
        // Refused by `plan_device` with the VFIO reason before it gets here.
        Some(OpaqueConfig::VfioDeviceConfig(_)) => None,
    };
    if let Some(asked) = sharing.map(|s| s.strategy)
        && asked != strategy
    {
        return Err(format!(
            "it is a share with strategy {}, but its config asks for sharing strategy {}",
            strategy.as_str(),
            asked.as_str()
        ));
    }
    match strategy {
        SharingStrategy::TimeSlicing => {
            let interval = sharing
                .and_then(|s| s.time_slicing.as_ref())
                .map(|t| t.interval)
                .unwrap_or_default();
            Ok(DevicePlan {
                sharing: Some(CardSharing {
                    strategy,
                    interval: Some(interval),
                    default_active_thread_percentage: None,
                }),
                ..DevicePlan::default()
            })
        }
        SharingStrategy::Mps => {
            let default = sharing
                .and_then(|s| s.mps.as_ref())
                .and_then(|m| m.default_active_thread_percentage);
            if let Some(percent) = default
                && !(1..=100).contains(&percent)
            {
                return Err(format!(
                    "mps.defaultActiveThreadPercentage is {percent}; allowed: 1 to 100"
                ));
            }
            // The scheduler writes sharePercent for every share; 100 is the offer's default.
            let percentage = default.map(u32::from).or(device.share_percent).unwrap_or(100);
            let pinned_memory_mib = device.share_memory_bytes.map(mps_memory_limit::limit_mib).transpose()?;
            Ok(DevicePlan {
                sharing: Some(CardSharing {
                    strategy,
                    interval: None,
                    default_active_thread_percentage: default,
                }),
                active_thread_percentage: Some(percentage),
                pinned_memory_mib,
                vfio: false,
            })
        }
        SharingStrategy::Exclusive => {
            Err("it is offered as a share with strategy Exclusive, which cannot be shared".to_owned())
        }
    }
}

/// `MPS`, `TimeSlicing`, `TimeSlicing (interval Long)`, `MPS (defaultActiveThreadPercentage 50)`.
impl fmt::Display for CardSharing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.strategy.as_str())?;
        match (self.interval, self.default_active_thread_percentage) {
            (Some(interval), _) if interval != TimeSliceInterval::Default => write!(f, " (interval {interval:?})"),
            (_, Some(percent)) => write!(f, " (defaultActiveThreadPercentage {percent})"),
            _ => Ok(()),
        }
    }
}
