//! The controller's Events, one per object and reason, updated rather than repeated. kube's
//! `Recorder` keys its series by object and reason but keeps the first note: a claim whose Pending
//! reason changed, or that was allocated again with other devices, would keep showing the old text
//! with a growing count. Here a later publication of the same reason patches the Event it made:
//! the note becomes the new one and the series counts it. events.k8s.io/v1 refuses any change of
//! `note` on update ("field is immutable"); the core/v1 view of the same Event lets an update
//! change its `message` (the note) and `series`, so the patch goes there. An Event the API
//! server no longer has (they expire) is created again. Entries of objects that are gone are
//! pruned with the claims and Pods.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// What was published for one (object uid, reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub name: String,
    pub count: i32,
}

/// The write one publication needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Publication {
    Create(Box<Event>),
    /// Merge patch of the Event named so, in its core/v1 form.
    Patch {
        name: String,
        patch: serde_json::Value,
    },
}

/// Reporter of the Events.
pub struct Reporter {
    pub controller: String,
    pub instance: String,
}

/// One Event to publish.
pub struct Notice<'a> {
    pub regarding: &'a ObjectReference,
    pub warning: bool,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

/// The write that publishes `notice`, given what was published before for its object and reason.
pub fn publication(
    before: Option<&Published>,
    notice: &Notice<'_>,
    reporter: &Reporter,
    now: Timestamp,
) -> Publication {
    match before {
        Some(before) => {
            let series = EventSeries {
                count: before.count + 1,
                last_observed_time: MicroTime(now),
            };
            Publication::Patch {
                name: before.name.clone(),
                patch: json!({"message": notice.note, "series": series}),
            }
        }
        None => Publication::Create(Box::new(new_event(notice, reporter, now))),
    }
}

/// A new Event for `notice`, named after its object and the time.
fn new_event(notice: &Notice<'_>, reporter: &Reporter, now: Timestamp) -> Event {
    let name = notice.regarding.name.clone().unwrap_or_default();
    let mut event = Event {
        action: Some(notice.action.to_owned()),
        event_time: Some(MicroTime(now)),
        note: Some(notice.note.to_owned()),
        reason: Some(notice.reason.to_owned()),
        regarding: Some(notice.regarding.clone()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(reporter.instance.clone()),
        type_: Some(if notice.warning { "Warning" } else { "Normal" }.to_owned()),
        ..Event::default()
    };
    event.metadata.name = Some(format!("{name}.{:x}", now.as_nanosecond()));
    event.metadata.namespace = notice.regarding.namespace.clone();
    event
}

pub struct NoteEvents {
    client: Client,
    reporter: Reporter,
    published: Mutex<HashMap<(String, String), Published>>,
}

impl NoteEvents {
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> NoteEvents {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
        };
        NoteEvents {
            client,
            reporter,
            published: Mutex::default(),
        }
    }

    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        let notice = Notice {
            regarding,
            warning: false,
            reason,
            action,
            note: &note,
        };
        self.publish(&notice).await;
    }

    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        let notice = Notice {
            regarding,
            warning: true,
            reason,
            action,
            note: &note,
        };
        self.publish(&notice).await;
    }

    /// Forgets the Events of objects not in `live` (uids).
    pub fn prune(&self, live: &HashSet<String>) {
        self.lock().retain(|(uid, _), _| live.contains(uid));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Published>> {
        self.published.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes; a failure is logged, never fatal.
    async fn publish(&self, notice: &Notice<'_>) {
        let key = (
            notice.regarding.uid.clone().unwrap_or_default(),
            notice.reason.to_owned(),
        );
        let before = self.lock().get(&key).cloned();
        let namespace = notice
            .regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let api = Api::<Event>::namespaced(self.client.clone(), &namespace);
        let core = Api::<CoreEvent>::namespaced(self.client.clone(), &namespace);
        let now = Timestamp::now();
        let stored = match publication(before.as_ref(), notice, &self.reporter, now) {
            Publication::Patch { name, patch } => {
                match core.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    // It expired: a new one.
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        create(&api, &new_event(notice, &self.reporter, now)).await
                    }
                    other => other.map(|_| Published {
                        name,
                        count: before.map_or(1, |b| b.count + 1),
                    }),
                }
            }
            Publication::Create(event) => create(&api, &event).await,
        };
        match stored {
            Ok(published) => {
                self.lock().insert(key, published);
            }
            Err(error) => tracing::warn!(%error, reason = notice.reason, "could not publish event"),
        }
    }
}

async fn create(api: &Api<Event>, event: &Event) -> Result<Published, kube::Error> {
    let created = api.create(&PostParams::default(), event).await?;
    Ok(Published {
        name: created.metadata.name.unwrap_or_default(),
        count: 1,
    })
}

#[cfg(test)]
#[path = "note_events_tests.rs"]
mod tests;
