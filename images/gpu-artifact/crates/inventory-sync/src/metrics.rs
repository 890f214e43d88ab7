//! The node agent's metrics: how many GPUs it keeps PhysicalGPUs for on its node after its last
//! successful sync, and how many syncs failed (each is retried with backoff). Prometheus adds the
//! `node` label from the Pod; nothing here names a node or a card.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Default)]
pub struct AgentMetrics {
    gpus: Gauge,
    sync_errors: Counter,
    pci_uevents: Counter,
}

impl AgentMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "gpu_node_agent_gpus",
            "GPUs of this node the agent keeps PhysicalGPU objects for, as of its last successful sync",
            metrics.gpus.clone(),
        );
        registry.register(
            "gpu_node_agent_sync_errors",
            "Inventory syncs of this node that failed (node labels or PhysicalGPU writes); each is retried",
            metrics.sync_errors.clone(),
        );
        registry.register(
            "gpu_node_agent_pci_uevents",
            "Kernel uevents of PCI devices the agent received (each makes it look at the host again)",
            metrics.pci_uevents.clone(),
        );
        metrics
    }

    pub(crate) fn pci_uevent(&self) {
        self.pci_uevents.inc();
    }

    pub(crate) fn synced(&self, gpus: usize) {
        self.gpus.set(i64::try_from(gpus).unwrap_or(i64::MAX));
    }

    pub(crate) fn sync_failed(&self) {
        self.sync_errors.inc();
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn scrape(registry: &Registry) -> String {
        component_base::metrics_text(registry).unwrap()
    }

    #[test]
    fn a_sync_sets_the_gpu_count_and_a_failure_is_counted_without_changing_it() {
        let mut registry = Registry::default();
        let metrics = AgentMetrics::register(&mut registry);
        metrics.synced(2);
        metrics.sync_failed();
        metrics.sync_failed();
        metrics.pci_uevent();
        let text = scrape(&registry);
        assert!(text.contains("gpu_node_agent_pci_uevents_total 1\n"), "{text}");
        assert!(text.contains("gpu_node_agent_gpus 2\n"), "{text}");
        assert!(text.contains("gpu_node_agent_sync_errors_total 2\n"), "{text}");
        metrics.synced(0);
        assert!(
            scrape(&registry).contains("gpu_node_agent_gpus 0\n"),
            "a removed card is counted out"
        );
    }
}
