//! Whether the kubelet accepted our plugin, as the readiness gate `kubelet-registration` and the
//! gauge `gpu_handler_plugin_registered` (1 registered, 0 not yet or rejected). Both follow the
//! plugin server's [`registered`](kubelet_plugin::PluginServer::registered) watch, so they never
//! disagree.

use component_base::Readiness;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// Ready once the kubelet has confirmed our registration.
pub const REGISTERED_GATE: &str = "kubelet-registration";

#[derive(Clone, Default)]
pub struct RegistrationMetric {
    registered: Gauge,
}

impl RegistrationMetric {
    pub fn register(registry: &mut Registry) -> Self {
        let metric = Self::default();
        registry.register(
            "gpu_handler_plugin_registered",
            "1 while the kubelet has accepted this node's DRA plugin registration, else 0",
            metric.registered.clone(),
        );
        metric
    }
}

/// Follows the kubelet's answers until the plugin server stops.
pub async fn follow_registration(
    mut registered: watch::Receiver<bool>,
    readiness: Readiness,
    metric: RegistrationMetric,
) {
    loop {
        let now = *registered.borrow_and_update();
        readiness.set(REGISTERED_GATE, now);
        metric.registered.set(i64::from(now));
        if registered.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scrape(registry: &Registry) -> String {
        component_base::metrics_text(registry).unwrap()
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn the_gauge_and_readiness_follow_the_kubelets_answers() {
        let mut registry = Registry::default();
        let metric = RegistrationMetric::register(&mut registry);
        let readiness = Readiness::default();
        readiness.register(REGISTERED_GATE);
        let (answers, registered) = watch::channel(false);
        let following = tokio::spawn(follow_registration(registered, readiness.clone(), metric));
        settle().await;
        assert!(scrape(&registry).contains("gpu_handler_plugin_registered 0\n"));
        assert_eq!(readiness.pending(), [REGISTERED_GATE]);

        answers.send_replace(true);
        settle().await;
        assert!(
            scrape(&registry).contains("gpu_handler_plugin_registered 1\n"),
            "{}",
            scrape(&registry)
        );
        assert!(readiness.pending().is_empty());

        answers.send_replace(false);
        settle().await;
        assert!(
            scrape(&registry).contains("gpu_handler_plugin_registered 0\n"),
            "a rejected re-registration"
        );
        assert_eq!(readiness.pending(), [REGISTERED_GATE]);

        drop(answers);
        tokio::time::timeout(Duration::from_secs(1), following)
            .await
            .expect("it stops with the plugin server")
            .unwrap();
    }
}
