//! Kubernetes Events on the objects a component acts on: where users look for why.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes Events as one component (`reportingController`) from one instance.
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// A Normal event; a failure to publish is logged, never fatal.
    pub async fn normal(&self, object: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(object, EventType::Normal, reason, action, note).await;
    }

    /// A Warning event; a failure to publish is logged, never fatal.
    pub async fn warning(&self, object: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(object, EventType::Warning, reason, action, note).await;
    }

    async fn publish(&self, object: &ObjectReference, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, object).await {
            tracing::warn!(%error, reason, "could not publish event");
        }
    }
}
