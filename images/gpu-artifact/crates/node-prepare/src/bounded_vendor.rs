//! The vendor library as the pipeline calls it: every call with a time limit. NVML calls are
//! ioctls into the kernel driver; a GPU that stops answering (a GSP timeout, a card falling off
//! the bus) can keep one in the kernel for a long time, and the pipeline holds the node lock
//! meanwhile. Each call runs on a thread of its own and the pipeline waits at most
//! `limit` for it: past that the call fails with an error naming it, and the thread is left to
//! finish on its own (a call stuck in the kernel cannot be interrupted). What such a call still
//! does later (a MIG device made after its prepare gave up) is found by the checkpoint's records,
//! as after a crash.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use gpu_vendor::{
    GpuInventory, GpuProcess, HealthMonitor, HealthReading, MigInstance, MigMode, MigPlacement, MigProfile, PciAddress,
    VendorBackend, VendorError,
};

pub(crate) struct BoundedVendor {
    inner: Arc<dyn VendorBackend>,
    limit: Duration,
}

impl BoundedVendor {
    pub fn new(inner: Arc<dyn VendorBackend>, limit: Duration) -> Self {
        BoundedVendor { inner, limit }
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
                    "it did not return within {:?}; the GPU or its driver is not answering (the call was abandoned)",
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
        self.call("create a MIG device", move |b| {
            b.create_mig_device(&card, profile_id, placement)
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
        let bounded = BoundedVendor::new(Arc::new(Hung), Duration::from_millis(50));
        let card: PciAddress = "0000:01:00.0".parse().unwrap();
        // The inner call never returns: that this one does is the bound at work.
        let error = bounded.mig_mode(&card).unwrap_err().to_string();
        assert!(
            error.starts_with("read the MIG mode failed: it did not return within 50ms"),
            "{error}"
        );
        assert_eq!(bounded.devices().unwrap(), Vec::new());
    }
}
