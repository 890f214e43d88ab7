//! Health as metrics: every Xid the cards reported, by the class the policy gives it
//! (`gpu_handler_xid_errors_total`), and each active cause of each card
//! (`gpu_handler_gpu_health_cause`, 1 while it lasts, gone when it clears, so alerts on it resolve
//! with the recovery).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct XidLabels {
    pub physicalgpu: String,
    pub pci_address: String,
    pub xid: String,
    /// `critical`, `application` or `ignored`.
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CauseLabels {
    pub physicalgpu: String,
    pub pci_address: String,
    /// The cause (`XidCritical`, `GPULost`, ... : the HardwareHealthy reasons, and `RowRemapPending`).
    pub cause: String,
    /// The Xid, the recovery action; empty otherwise.
    pub detail: String,
    /// `critical` or `informational`.
    pub severity: String,
}

#[derive(Clone, Default)]
pub struct HealthMetrics {
    xids: Family<XidLabels, Counter>,
    causes: Family<CauseLabels, Gauge>,
    /// The cause series set on the latest pass, to remove those that cleared.
    active: Arc<Mutex<BTreeSet<CauseLabels>>>,
}

impl HealthMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "gpu_handler_xid_errors",
            "Xid errors reported by this node's GPUs, by the class the health policy gives them",
            metrics.xids.clone(),
        );
        registry.register(
            "gpu_handler_gpu_health_cause",
            "1 for each active health cause of a GPU (critical: the GPU is unhealthy; informational: a note)",
            metrics.causes.clone(),
        );
        metrics
    }

    pub fn count_xid(&self, labels: XidLabels) {
        self.xids.get_or_create(&labels).inc();
    }

    /// Replaces the cause series with `now`: new ones are set to 1, cleared ones removed.
    pub fn set_causes(&self, now: BTreeSet<CauseLabels>) {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        for gone in active.difference(&now) {
            self.causes.remove(gone);
        }
        for cause in &now {
            self.causes.get_or_create(cause).set(1);
        }
        *active = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(detail: &str) -> CauseLabels {
        CauseLabels {
            physicalgpu: "w-0-10de-20b7".into(),
            pci_address: "0000:01:00.0".into(),
            cause: "XidCritical".into(),
            detail: detail.into(),
            severity: "critical".into(),
        }
    }

    #[test]
    fn causes_appear_and_vanish_with_the_fault() {
        let mut registry = Registry::default();
        let metrics = HealthMetrics::register(&mut registry);
        metrics.count_xid(XidLabels {
            physicalgpu: "w-0-10de-20b7".into(),
            pci_address: "0000:01:00.0".into(),
            xid: "13".into(),
            class: "application".into(),
        });
        metrics.set_causes(BTreeSet::from([cause("79")]));
        let text = component_base::metrics_text(&registry).unwrap();
        assert!(text.contains(r#"gpu_handler_xid_errors_total{physicalgpu="w-0-10de-20b7",pci_address="0000:01:00.0",xid="13",class="application"} 1"#), "{text}");
        assert!(text.contains(r#"gpu_handler_gpu_health_cause{physicalgpu="w-0-10de-20b7",pci_address="0000:01:00.0",cause="XidCritical",detail="79",severity="critical"} 1"#), "{text}");
        metrics.set_causes(BTreeSet::new());
        let text = component_base::metrics_text(&registry).unwrap();
        assert!(!text.contains("gpu_handler_gpu_health_cause{"), "{text}");
    }
}
