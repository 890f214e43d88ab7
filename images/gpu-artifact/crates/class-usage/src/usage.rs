//! One class counted against the index: which published devices its selectors match (in order,
//! stopping at the first false as the scheduler does), which of them a new claim could get now,
//! and how many devices claims hold through it.

use dra_cel::{Quantity, SelectorCache};
use k8s_openapi::api::resource::v1::DeviceCapacity;

use crate::index::{DeviceUsageIndex, PublishedDevice, qualified};

/// The devices of one class now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassUsage {
    /// Published devices its selectors match.
    pub published: i64,
    /// Distinct devices allocated to claims through requests that name the class, published or not
    /// (a card on vfio-pci is not published while a virtual machine has it).
    pub allocated: i64,
    /// Published devices of the class a new claim could get: not held exclusively, a shared one with
    /// capacity left, not tainted NoSchedule or NoExecute, and every counter it consumes still there.
    pub free: i64,
    /// The first CEL error a selector gave on a published device (the scheduler fails a claim on it).
    pub selector_error: Option<String>,
}

impl DeviceUsageIndex {
    /// Counts the devices of the class `class_name` whose selectors are `selectors`.
    pub fn usage(&self, class_name: &str, selectors: &[String], cel: &SelectorCache) -> ClassUsage {
        let mut usage = ClassUsage {
            allocated: self
                .allocated_by_class
                .get(class_name)
                .map_or(0, |keys| keys.len() as i64),
            ..ClassUsage::default()
        };
        for device in &self.devices {
            match matches(device, selectors, cel) {
                Ok(false) => {}
                Ok(true) => {
                    usage.published += 1;
                    if self.is_free(device) {
                        usage.free += 1;
                    }
                }
                Err(error) => {
                    usage
                        .selector_error
                        .get_or_insert(format!("device {}: {error}", device.key.2));
                }
            }
        }
        usage
    }

    fn is_free(&self, device: &PublishedDevice) -> bool {
        let tainted = device
            .device
            .taints
            .iter()
            .flatten()
            .any(|taint| taint.effect == "NoSchedule" || taint.effect == "NoExecute");
        if tainted {
            return false;
        }
        let held = self.holdings.get(&device.key);
        if let Some(holding) = held {
            if holding.exclusive || device.device.allow_multiple_allocations != Some(true) {
                return false;
            }
            if !room_left(&device.device.capacity, &device.key.0, &holding.consumed) {
                return false;
            }
        }
        // A held device already took its counters; anyone else's allocation on the card shows as
        // counters gone.
        held.is_some()
            || device
                .consumes
                .iter()
                .all(|(counter, amount)| self.available.get(counter).is_some_and(|left| left >= amount))
    }
}

fn matches(device: &PublishedDevice, selectors: &[String], cel: &SelectorCache) -> Result<bool, String> {
    let context = cel
        .device_context(&device.key.0, &device.device)
        .map_err(|e| e.to_string())?;
    for expression in selectors {
        let compiled = cel.get_or_compile(expression).map_err(|e| e.to_string())?;
        if !compiled.matches(&context).map_err(|e| e.to_string())? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Every capacity the shares consume still has some left.
fn room_left(
    capacity: &Option<std::collections::BTreeMap<String, DeviceCapacity>>,
    driver: &str,
    consumed: &std::collections::BTreeMap<String, Quantity>,
) -> bool {
    capacity.iter().flatten().all(|(name, cap)| {
        let Ok(value) = Quantity::parse(&cap.value.0) else {
            return true;
        };
        consumed.get(&qualified(name, driver)).is_none_or(|used| *used < value)
    })
}
