//! The kubelet's device health cache (`pkg/kubelet/cm/dra/healthinfo.go`): what each driver's
//! health stream last said about each device, stamped with when the kubelet received it. A device
//! not heard of within its timeout (the plugin's `health_check_timeout_seconds`, else 30 s) reads
//! Unknown; a stream that ends clears its driver.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The kubelet's default when the plugin gives no timeout.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// The health a Pod's status shows (`v1.ResourceHealthStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceHealthStatus {
    Healthy,
    Unhealthy,
    Unknown,
}

impl DeviceHealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceHealthStatus::Healthy => "Healthy",
            DeviceHealthStatus::Unhealthy => "Unhealthy",
            DeviceHealthStatus::Unknown => "Unknown",
        }
    }
}

/// One device as a stream reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedDevice {
    pub pool: String,
    pub device: String,
    pub health: DeviceHealthStatus,
    pub message: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
struct Entry {
    reported: ReportedDevice,
    received: Instant,
}

#[derive(Debug, Default)]
pub(crate) struct HealthCache {
    /// Driver -> (pool, device) -> the latest report.
    drivers: BTreeMap<String, BTreeMap<(String, String), Entry>>,
}

impl HealthCache {
    /// Takes a complete report of `driver`'s devices; returns whether any health or message changed
    /// (a device missing from it turns Unknown once its timeout has passed, as in the kubelet).
    pub(crate) fn update(&mut self, driver: &str, devices: Vec<ReportedDevice>, now: Instant) -> bool {
        let known = self.drivers.entry(driver.to_owned()).or_default();
        let mut changed = false;
        let mut reported = Vec::with_capacity(devices.len());
        for device in devices {
            let key = (device.pool.clone(), device.device.clone());
            let before = known.get(&key).map(|e| &e.reported);
            changed |= before.is_none_or(|b| b.health != device.health || b.message != device.message);
            reported.push(key.clone());
            known.insert(
                key,
                Entry {
                    reported: device,
                    received: now,
                },
            );
        }
        known.retain(|key, entry| {
            let stale = !reported.contains(key) && now.duration_since(entry.received) > entry.reported.timeout;
            changed |= stale && entry.reported.health != DeviceHealthStatus::Unknown;
            !stale
        });
        changed
    }

    /// The stream of `driver` ended: everything it said is forgotten.
    pub(crate) fn clear_driver(&mut self, driver: &str) -> bool {
        self.drivers.remove(driver).is_some_and(|devices| !devices.is_empty())
    }

    /// What a Pod's status shows for a device now: Unknown when unheard of or stale.
    pub(crate) fn get(&self, driver: &str, pool: &str, device: &str, now: Instant) -> (DeviceHealthStatus, String) {
        let key = (pool.to_owned(), device.to_owned());
        match self.drivers.get(driver).and_then(|d| d.get(&key)) {
            Some(entry) if now.duration_since(entry.received) <= entry.reported.timeout => {
                (entry.reported.health, entry.reported.message.clone())
            }
            _ => (DeviceHealthStatus::Unknown, String::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, health: DeviceHealthStatus) -> ReportedDevice {
        ReportedDevice {
            pool: "gpus/n".into(),
            device: name.into(),
            health,
            message: String::new(),
            timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn reports_expire_into_unknown_and_a_closed_stream_forgets() {
        let mut cache = HealthCache::default();
        let start = Instant::now();
        assert!(cache.update("gpu", vec![device("gpu0", DeviceHealthStatus::Healthy)], start));
        assert!(
            !cache.update("gpu", vec![device("gpu0", DeviceHealthStatus::Healthy)], start),
            "same news"
        );
        assert_eq!(cache.get("gpu", "gpus/n", "gpu0", start).0, DeviceHealthStatus::Healthy);
        let later = start + Duration::from_secs(31);
        assert_eq!(cache.get("gpu", "gpus/n", "gpu0", later).0, DeviceHealthStatus::Unknown);
        assert!(cache.update("gpu", vec![device("gpu0", DeviceHealthStatus::Unhealthy)], later));
        assert!(cache.clear_driver("gpu"));
        assert_eq!(cache.get("gpu", "gpus/n", "gpu0", later).0, DeviceHealthStatus::Unknown);
    }
}
