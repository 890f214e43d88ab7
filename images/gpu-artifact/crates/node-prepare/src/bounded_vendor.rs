//! The vendor library as the pipeline calls it: every call with a time limit. NVML calls are
//! ioctls into the kernel driver; a GPU that stops answering (a GSP timeout, a card falling off
//! the bus) can keep one in the kernel for a long time, and the pipeline holds the node lock
//! meanwhile. Each call runs on a thread of its own and the pipeline waits at most
//! `limit` for it: past that the call fails with an error naming it, and the thread is left to
//! finish on its own (a call stuck in the kernel cannot be interrupted).
//!
//! What such a call still does later is the claim's: a MIG create given up on keeps its claim's
//! `PrepareStarted` record (which says the creation was attempted at that placement), and the
//! rollback of that record (the claim's retry, the node's upkeep, the next start) waits until the
//! call has returned ([`mig_create_running`]) before it looks for the instance to destroy.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use gpu_vendor::{
    GpuInventory, GpuProcess, HealthMonitor, HealthReading, MigInstance, MigMode, MigPlacement, MigProfile, PciAddress,
    VendorBackend, VendorError,
};

/// How the reason of a call given up on begins (see [`was_abandoned`]).
const ABANDONED: &str = "it did not return within";

/// MIG creates in flight: node (its plugin directory), card, placement. Process-wide, because a
/// call given up on outlives the preparer that started it (the handler makes one per request).
static MIG_CREATES_IN_FLIGHT: Mutex<Vec<(PathBuf, PciAddress, MigPlacement)>> = Mutex::new(Vec::new());

/// Whether a MIG create on `card` at a placement overlapping `placement` is still in the vendor
/// library on the node whose plugin directory is `node`.
pub(crate) fn mig_create_running(node: &Path, card: &PciAddress, placement: &MigPlacement) -> bool {
    let in_flight = MIG_CREATES_IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
    in_flight
        .iter()
        .any(|(n, c, p)| n == node && c == card && p.overlaps(placement))
}

/// Whether `error` is a call this module stopped waiting for (it may still do what it was asked).
pub(crate) fn was_abandoned(error: &VendorError) -> bool {
    matches!(error, VendorError::Failed { reason, .. } if reason.starts_with(ABANDONED))
}

/// A MIG create's entry in [`MIG_CREATES_IN_FLIGHT`], removed when the call returns.
struct InFlight((PathBuf, PciAddress, MigPlacement));

impl InFlight {
    fn enter(entry: (PathBuf, PciAddress, MigPlacement)) -> Self {
        let mut in_flight = MIG_CREATES_IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
        in_flight.push(entry.clone());
        InFlight(entry)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut in_flight = MIG_CREATES_IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = in_flight.iter().position(|entry| *entry == self.0) {
            in_flight.swap_remove(at);
        }
    }
}

pub(crate) struct BoundedVendor {
    inner: Arc<dyn VendorBackend>,
    limit: Duration,
    /// The node's plugin directory: whose MIG creates are in flight.
    node: PathBuf,
}

impl BoundedVendor {
    pub fn new(inner: Arc<dyn VendorBackend>, limit: Duration, node: &Path) -> Self {
        BoundedVendor {
            inner,
            limit,
            node: node.to_owned(),
        }
    }

    fn call<T: Send + 'static>(
        &self,
        name: &str,
        call: impl FnOnce(&dyn VendorBackend) -> Result<T, VendorError> + Send + 'static,
    ) -> Result<T, VendorError> {
        let inner = Arc::clone(&self.inner);
        let (done, outcome) = mpsc::channel();
        let spawned = thread::Builder::new().name("vendor-call".into()).spawn(move || {
            let _ = done.send(call(inner.as_ref()));
        });
        if let Err(error) = spawned {
            return Err(VendorError::Failed {
                call: name.to_owned(),
                reason: format!("cannot start a thread for it: {error}"),
            });
        }
        outcome.recv_timeout(self.limit).unwrap_or_else(|_| {
            Err(VendorError::Failed {
                call: name.to_owned(),
                reason: format!(
                    "{ABANDONED} {:?}; the GPU or its driver is not answering (the call was abandoned)",
                    self.limit
                ),
            })
        })
    }
}

impl VendorBackend for BoundedVendor {
    fn devices(&self) -> Result<Vec<PciAddress>, VendorError> {
        self.call("list the GPUs", |b| b.devices())
    }

    fn inventory(&self, card: &PciAddress) -> Result<GpuInventory, VendorError> {
        let card = *card;
        self.call("read the GPU's inventory", move |b| b.inventory(&card))
    }

    fn mig_profiles(&self, card: &PciAddress) -> Result<Vec<MigProfile>, VendorError> {
        let card = *card;
        self.call("read the MIG profiles", move |b| b.mig_profiles(&card))
    }

    fn mig_mode(&self, card: &PciAddress) -> Result<Option<MigMode>, VendorError> {
        let card = *card;
        self.call("read the MIG mode", move |b| b.mig_mode(&card))
    }

    fn set_mig_mode(&self, card: &PciAddress, enabled: bool) -> Result<MigMode, VendorError> {
        let card = *card;
        self.call("set the MIG mode", move |b| b.set_mig_mode(&card, enabled))
    }

    fn mig_instances(&self, card: &PciAddress) -> Result<Vec<MigInstance>, VendorError> {
        let card = *card;
        self.call("list the MIG instances", move |b| b.mig_instances(&card))
    }

    fn create_mig_device(
        &self,
        card: &PciAddress,
        profile_id: u32,
        placement: MigPlacement,
    ) -> Result<MigInstance, VendorError> {
        let card = *card;
        let in_flight = InFlight::enter((self.node.clone(), card, placement));
        self.call("create a MIG device", move |b| {
            let made = b.create_mig_device(&card, profile_id, placement);
            drop(in_flight);
            made
        })
    }

    fn destroy_mig_device(&self, card: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError> {
        let card = *card;
        self.call("destroy a MIG device", move |b| {
            b.destroy_mig_device(&card, gpu_instance_id)
        })
    }

    fn destroy_compute_instance(
        &self,
        card: &PciAddress,
        gpu_instance_id: u32,
        compute_instance_id: u32,
    ) -> Result<(), VendorError> {
        let card = *card;
        self.call("destroy a compute instance", move |b| {
            b.destroy_compute_instance(&card, gpu_instance_id, compute_instance_id)
        })
    }

    fn destroy_gpu_instance(&self, card: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError> {
        let card = *card;
        self.call("destroy a GPU instance", move |b| {
            b.destroy_gpu_instance(&card, gpu_instance_id)
        })
    }

    fn running_processes(&self, card: &PciAddress) -> Result<Vec<GpuProcess>, VendorError> {
        let card = *card;
        self.call("list the GPU's processes", move |b| b.running_processes(&card))
    }

    /// Not a pipeline call: the handler's health loop owns the monitor and its waits.
    fn health_monitor(&self, cards: &[PciAddress]) -> Result<Box<dyn HealthMonitor>, VendorError> {
        self.inner.health_monitor(cards)
    }

    fn health_reading(&self, card: &PciAddress) -> Result<HealthReading, VendorError> {
        let card = *card;
        self.call("read the GPU's health", move |b| b.health_reading(&card))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend whose MIG mode read never returns.
    struct Hung;

    impl VendorBackend for Hung {
        fn devices(&self) -> Result<Vec<PciAddress>, VendorError> {
            Ok(Vec::new())
        }
        fn inventory(&self, card: &PciAddress) -> Result<GpuInventory, VendorError> {
            Err(VendorError::NotFound(*card))
        }
        fn mig_profiles(&self, _: &PciAddress) -> Result<Vec<MigProfile>, VendorError> {
            Ok(Vec::new())
        }
        fn mig_mode(&self, _: &PciAddress) -> Result<Option<MigMode>, VendorError> {
            loop {
                thread::park();
            }
        }
        fn set_mig_mode(&self, card: &PciAddress, _: bool) -> Result<MigMode, VendorError> {
            Err(VendorError::NotFound(*card))
        }
        fn mig_instances(&self, _: &PciAddress) -> Result<Vec<MigInstance>, VendorError> {
            Ok(Vec::new())
        }
        fn create_mig_device(&self, card: &PciAddress, _: u32, _: MigPlacement) -> Result<MigInstance, VendorError> {
            Err(VendorError::NotFound(*card))
        }
        fn destroy_mig_device(&self, _: &PciAddress, _: u32) -> Result<(), VendorError> {
            Ok(())
        }
        fn destroy_compute_instance(&self, _: &PciAddress, _: u32, _: u32) -> Result<(), VendorError> {
            Ok(())
        }
        fn destroy_gpu_instance(&self, _: &PciAddress, _: u32) -> Result<(), VendorError> {
            Ok(())
        }
        fn running_processes(&self, _: &PciAddress) -> Result<Vec<GpuProcess>, VendorError> {
            Ok(Vec::new())
        }
        fn health_monitor(&self, _: &[PciAddress]) -> Result<Box<dyn HealthMonitor>, VendorError> {
            Err(VendorError::DriverNotLoaded)
        }
        fn health_reading(&self, card: &PciAddress) -> Result<HealthReading, VendorError> {
            Err(VendorError::NotFound(*card))
        }
    }

    #[test]
    fn a_call_that_does_not_return_in_time_fails_naming_it() {
        let bounded = BoundedVendor::new(Arc::new(Hung), Duration::from_millis(50), Path::new("/node"));
        let card: PciAddress = "0000:01:00.0".parse().unwrap();
        // The inner call never returns: that this one does is the bound at work.
        let error = bounded.mig_mode(&card).unwrap_err().to_string();
        assert!(
            error.starts_with("read the MIG mode failed: it did not return within 50ms"),
            "{error}"
        );
        assert!(was_abandoned(&bounded.mig_mode(&card).unwrap_err()));
        assert_eq!(bounded.devices().unwrap(), Vec::new());
    }
}
