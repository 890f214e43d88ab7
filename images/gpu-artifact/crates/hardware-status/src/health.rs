//! The `HardwareHealthy` rule: False while the health model ([`gpu_health`]) finds a critical
//! cause (a critical Xid not yet recovered, a lost card, uncorrectable memory errors, a failed row
//! remapping, a recovery action the driver asks for), True when the card answers the vendor library
//! with none, Unknown when the library cannot tell. The message is the model's: each cause, since
//! when, and how it clears.

use gpu_health::CardHealth;
use gpu_vendor::PciAddress;

/// A condition to publish, without its timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    pub fn new(status: &'static str, reason: &'static str, message: String) -> Self {
        Self {
            status,
            reason,
            message,
        }
    }
}

/// What the handler knows about one card when it judges its health.
#[derive(Clone, Copy, Debug)]
pub enum CardObservation<'a> {
    /// The vendor library cannot be used; `reason` is the loader's error.
    LibraryUnavailable { reason: &'a str },
    /// The card is not on the vendor's driver (vfio-pci, unbound), so the library cannot see it.
    NotOnVendorDriver { driver: &'a str },
    /// The handler has not asked the library about the card yet.
    NotQueried,
    /// The library answered about the card (`Ok(uuid)`) or failed (`Err`) with the reason.
    Queried {
        answer: Result<&'a str, &'a gpu_vendor::VendorError>,
        health: &'a CardHealth,
        /// Why health events are not watched, when they are not.
        monitor_problem: Option<&'a str>,
    },
}

/// The condition for a card at `address`.
pub fn hardware_healthy(address: &PciAddress, observation: CardObservation<'_>) -> Verdict {
    use gpu_vendor::VendorError;
    match observation {
        CardObservation::LibraryUnavailable { reason } => Verdict::new(
            "Unknown",
            "NVMLUnavailable",
            format!("NVML cannot be used on this node, so the health of GPU {address} is unknown: {reason}"),
        ),
        CardObservation::NotOnVendorDriver { driver } => Verdict::new(
            "Unknown",
            "NotOnNvidiaDriver",
            format!("GPU {address} is {driver}, so NVML cannot observe it"),
        ),
        CardObservation::NotQueried => Verdict::new(
            "Unknown",
            "NotYetQueried",
            format!("the handler has not queried GPU {address} yet"),
        ),
        CardObservation::Queried {
            answer,
            health,
            monitor_problem,
        } => {
            let card = match answer {
                Ok(uuid) => format!("GPU {address} ({uuid})"),
                Err(_) => format!("GPU {address}"),
            };
            if let Some(reason) = health.reason() {
                return Verdict::new("False", reason, format!("{card}: {}", health.describe()));
            }
            match answer {
                Err(VendorError::NotFound(_)) => Verdict::new(
                    "False",
                    "NVMLDeviceNotFound",
                    format!("{card} is bound to the nvidia driver but NVML does not see it"),
                ),
                Err(error) => Verdict::new("Unknown", "NVMLQueryFailed", format!("{card}: {error}")),
                Ok(_) => {
                    let mut message = format!("{card} answers NVML; no critical fault");
                    if !health.causes.is_empty() {
                        message.push_str(&format!(". Note: {}", health.describe()));
                    }
                    if let Some(problem) = monitor_problem {
                        message.push_str(&format!(". Xid events are not watched: {problem}"));
                    }
                    Verdict::new("True", "DeviceHealthy", message)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_health::{CardRecord, HealthPolicy, assess};
    use gpu_vendor::{HealthEventKind, HealthReading, RemappedRows, VendorError};

    use super::*;

    fn card() -> PciAddress {
        "0000:41:00.0".parse().unwrap()
    }

    fn health_after(xids: &[u64], reading: HealthReading) -> CardHealth {
        let policy = HealthPolicy::default();
        let mut record = CardRecord::default();
        for xid in xids {
            let kind = HealthEventKind::Xid {
                xid: *xid,
                gpu_instance_id: None,
                compute_instance_id: None,
            };
            record.record_event(&kind, &policy, 0);
        }
        assess(&mut record, Some(&reading), &policy, 0)
    }

    fn queried<'a>(answer: Result<&'a str, &'a VendorError>, health: &'a CardHealth) -> CardObservation<'a> {
        CardObservation::Queried {
            answer,
            health,
            monitor_problem: None,
        }
    }

    #[test]
    fn a_card_that_answers_with_nothing_critical_is_healthy() {
        let health = health_after(&[13], HealthReading::default());
        let verdict = hardware_healthy(&card(), queried(Ok("GPU-1"), &health));
        assert_eq!((verdict.status, verdict.reason), ("True", "DeviceHealthy"));
        assert_eq!(
            verdict.message,
            "GPU 0000:41:00.0 (GPU-1) answers NVML; no critical fault"
        );
        let noted = health_after(
            &[],
            HealthReading {
                remapped_rows: Some(RemappedRows {
                    pending: true,
                    ..RemappedRows::default()
                }),
                ..HealthReading::default()
            },
        );
        let verdict = hardware_healthy(&card(), queried(Ok("GPU-1"), &noted));
        assert_eq!(verdict.status, "True");
        assert!(
            verdict.message.contains(". Note: memory rows were remapped"),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn critical_causes_turn_it_false_with_the_models_message() {
        let health = health_after(&[79, 48], HealthReading::default());
        let verdict = hardware_healthy(&card(), queried(Ok("GPU-1"), &health));
        assert_eq!((verdict.status, verdict.reason), ("False", "XidCritical"));
        assert!(
            verdict
                .message
                .starts_with("GPU 0000:41:00.0 (GPU-1): critical Xid 48 (double-bit ECC error) since"),
            "{}",
            verdict.message
        );
        assert!(verdict.message.contains("Also: critical Xid 79"), "{}", verdict.message);
        let lost = health_after(&[], HealthReading::lost());
        let error = VendorError::DeviceLost(card());
        let verdict = hardware_healthy(&card(), queried(Err(&error), &lost));
        assert_eq!((verdict.status, verdict.reason), ("False", "GPULost"));
    }

    #[test]
    fn what_the_library_cannot_tell_is_unknown_with_the_reason() {
        let missing = hardware_healthy(
            &card(),
            CardObservation::LibraryUnavailable {
                reason: "libnvidia-ml.so.1: cannot open shared object file",
            },
        );
        assert_eq!((missing.status, missing.reason), ("Unknown", "NVMLUnavailable"));
        assert!(missing.message.ends_with("cannot open shared object file"));
        let vfio = hardware_healthy(
            &card(),
            CardObservation::NotOnVendorDriver {
                driver: "bound to vfio-pci",
            },
        );
        assert_eq!((vfio.status, vfio.reason), ("Unknown", "NotOnNvidiaDriver"));
        let healthy = CardHealth::default();
        let error = VendorError::Failed {
            call: "nvmlDeviceGetUUID".into(),
            reason: "Unknown Error".into(),
        };
        let failed = hardware_healthy(&card(), queried(Err(&error), &healthy));
        assert_eq!((failed.status, failed.reason), ("Unknown", "NVMLQueryFailed"));
        let gone = VendorError::NotFound(card());
        let unseen = hardware_healthy(&card(), queried(Err(&gone), &healthy));
        assert_eq!((unseen.status, unseen.reason), ("False", "NVMLDeviceNotFound"));
    }
}
