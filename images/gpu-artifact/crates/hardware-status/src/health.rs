//! The `HardwareHealthy` rule: True when the card answers the vendor library and no critical event
//! is pending, False on a critical Xid or a lost card, Unknown when the library cannot tell.
//!
//! A critical event stays pending for the life of the handler process: NVIDIA documents the
//! critical Xids as needing a GPU reset or a reboot, and neither is visible through NVML, so the
//! handler restart that comes with a node reboot (or an operator's deliberate restart) is what
//! clears it. The NVIDIA device plugin and DRA driver behave the same way.

use std::collections::{BTreeMap, BTreeSet};

use gpu_vendor::{HealthEvent, HealthEventKind, PciAddress};

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

/// Critical events seen per card since the handler started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthLedger {
    cards: BTreeMap<PciAddress, PendingTrouble>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingTrouble {
    /// Distinct critical Xids, ordered, so the message is stable whatever the arrival order.
    pub xids: BTreeSet<u64>,
    pub lost: bool,
}

impl HealthLedger {
    /// Records `event`; returns whether it changed what is pending (a non-critical Xid never does).
    pub fn record(&mut self, event: &HealthEvent) -> bool {
        if !event.is_critical() {
            return false;
        }
        let trouble = self.cards.entry(event.pci_address).or_default();
        match &event.kind {
            HealthEventKind::Xid { xid, .. } => trouble.xids.insert(*xid),
            HealthEventKind::DeviceLost => !std::mem::replace(&mut trouble.lost, true),
            _ => false,
        }
    }

    pub fn pending(&self, card: &PciAddress) -> Option<&PendingTrouble> {
        self.cards.get(card)
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
        pending: Option<&'a PendingTrouble>,
        /// Why Xid events are not watched, when they are not.
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
            pending,
            monitor_problem,
        } => {
            let lost = pending.is_some_and(|p| p.lost) || matches!(answer, Err(VendorError::DeviceLost(_)));
            let card = match answer {
                Ok(uuid) => format!("GPU {address} ({uuid})"),
                Err(_) => format!("GPU {address}"),
            };
            if lost {
                return Verdict::new(
                    "False",
                    "GPULost",
                    format!("{card} fell off the bus (NVML reports it lost); it needs a reset or a reboot"),
                );
            }
            if let Some(xids) = pending.map(|p| &p.xids).filter(|x| !x.is_empty()) {
                let list: Vec<String> = xids.iter().map(u64::to_string).collect();
                let plural = if xids.len() == 1 { "" } else { "s" };
                return Verdict::new(
                    "False",
                    "XidCritical",
                    format!(
                        "critical Xid{plural} {} on {card}; it needs a reset or a reboot",
                        list.join(", ")
                    ),
                );
            }
            match answer {
                Err(VendorError::NotFound(_)) => Verdict::new(
                    "False",
                    "NVMLDeviceNotFound",
                    format!("{card} is bound to the nvidia driver but NVML does not see it"),
                ),
                Err(error) => Verdict::new("Unknown", "NVMLQueryFailed", format!("{card}: {error}")),
                Ok(_) => {
                    let watched = match monitor_problem {
                        None => "no critical Xid since the handler started".to_owned(),
                        Some(problem) => format!("Xid events are not watched: {problem}"),
                    };
                    Verdict::new("True", "DeviceHealthy", format!("{card} answers NVML; {watched}"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_vendor::VendorError;

    use super::*;

    fn card() -> PciAddress {
        "0000:41:00.0".parse().unwrap()
    }

    fn xid(xid: u64, critical: bool) -> HealthEvent {
        HealthEvent {
            pci_address: card(),
            kind: HealthEventKind::Xid {
                xid,
                critical,
                gpu_instance_id: None,
                compute_instance_id: None,
            },
        }
    }

    fn queried<'a>(answer: Result<&'a str, &'a VendorError>, ledger: &'a HealthLedger) -> CardObservation<'a> {
        CardObservation::Queried {
            answer,
            pending: ledger.pending(&card()),
            monitor_problem: None,
        }
    }

    #[test]
    fn a_card_that_answers_with_nothing_pending_is_healthy() {
        let mut ledger = HealthLedger::default();
        assert!(!ledger.record(&xid(13, false)), "an application Xid changes nothing");
        let verdict = hardware_healthy(&card(), queried(Ok("GPU-1"), &ledger));
        assert_eq!((verdict.status, verdict.reason), ("True", "DeviceHealthy"));
        assert!(
            verdict.message.contains("GPU 0000:41:00.0 (GPU-1)"),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn critical_xids_stay_pending_and_are_named_in_order() {
        let mut ledger = HealthLedger::default();
        assert!(ledger.record(&xid(79, true)));
        assert!(ledger.record(&xid(48, true)));
        assert!(!ledger.record(&xid(79, true)), "a repeat changes nothing");
        let verdict = hardware_healthy(&card(), queried(Ok("GPU-1"), &ledger));
        assert_eq!((verdict.status, verdict.reason), ("False", "XidCritical"));
        assert_eq!(
            verdict.message,
            "critical Xids 48, 79 on GPU 0000:41:00.0 (GPU-1); it needs a reset or a reboot"
        );
    }

    #[test]
    fn a_lost_card_is_unhealthy_whether_the_monitor_or_a_query_says_so() {
        let mut ledger = HealthLedger::default();
        ledger.record(&HealthEvent {
            pci_address: card(),
            kind: HealthEventKind::DeviceLost,
        });
        let by_event = hardware_healthy(&card(), queried(Ok("GPU-1"), &ledger));
        assert_eq!((by_event.status, by_event.reason), ("False", "GPULost"));
        let error = VendorError::DeviceLost(card());
        let by_query = hardware_healthy(&card(), queried(Err(&error), &HealthLedger::default()));
        assert_eq!((by_query.status, by_query.reason), ("False", "GPULost"));
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
        let error = VendorError::Failed {
            call: "nvmlDeviceGetUUID".into(),
            reason: "Unknown Error".into(),
        };
        let failed = hardware_healthy(&card(), queried(Err(&error), &HealthLedger::default()));
        assert_eq!((failed.status, failed.reason), ("Unknown", "NVMLQueryFailed"));
        let gone = VendorError::NotFound(card());
        let unseen = hardware_healthy(&card(), queried(Err(&gone), &HealthLedger::default()));
        assert_eq!((unseen.status, unseen.reason), ("False", "NVMLDeviceNotFound"));
    }
}
