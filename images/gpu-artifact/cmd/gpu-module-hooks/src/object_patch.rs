//! The Kubernetes object operations a hook hands to addon-operator (`KUBERNETES_PATCH_PATH`, shell-
//! operator's object-patch schema: `operation`, `apiVersion`, `kind`, `namespace`, `name`, `object`,
//! `mergePatch`, `jsonPatch`, `subresource`, `ignoreMissingObject`; nothing else is accepted), and the core/v1 Events
//! the hooks record with them. addon-operator applies the operations with Deckhouse's own rights and
//! retries the hook when one fails.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Namespace of the Events about cluster-scoped objects (Nodes, the Module), as the kubelet does.
pub const EVENT_NAMESPACE: &str = "default";
/// `source.component` / `reportingComponent` of the Events the hooks record.
pub const EVENT_COMPONENT: &str = "gpu-module-hooks";

/// Creates `object`, or replaces the one of its name.
pub fn create_or_update(object: Value) -> Value {
    json!({"operation": "CreateOrUpdate", "object": object})
}

/// Deletes an object; a missing one is not an error.
pub fn delete(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Value {
    let mut operation = json!({"operation": "Delete", "apiVersion": api_version, "kind": kind, "name": name});
    if let (Some(namespace), Some(fields)) = (namespace, operation.as_object_mut()) {
        fields.insert("namespace".to_owned(), json!(namespace));
    }
    operation
}

/// A JSON merge patch of a cluster-scoped object (`null` removes a key); a missing object is skipped.
pub fn merge_patch(api_version: &str, kind: &str, name: &str, patch: Value) -> Value {
    json!({"operation": "MergePatch", "apiVersion": api_version, "kind": kind, "name": name,
           "mergePatch": patch, "ignoreMissingObject": true})
}

/// A JSON patch (RFC 6902) of a namespaced object; a missing object is skipped.
pub fn json_patch(api_version: &str, kind: &str, namespace: &str, name: &str, patch: Value) -> Value {
    json!({"operation": "JSONPatch", "apiVersion": api_version, "kind": kind, "namespace": namespace,
           "name": name, "jsonPatch": patch, "ignoreMissingObject": true})
}

/// A JSON merge patch of the status subresource of a cluster-scoped object.
pub fn merge_patch_status(api_version: &str, kind: &str, name: &str, patch: Value) -> Value {
    json!({"operation": "MergePatch", "apiVersion": api_version, "kind": kind, "name": name,
           "subresource": "/status", "mergePatch": patch})
}

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq)]
pub struct Regarding {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub name: String,
}

impl Regarding {
    pub fn node(name: &str) -> Self {
        Self {
            api_version: "v1",
            kind: "Node",
            name: name.to_owned(),
        }
    }

    pub fn module(name: &str) -> Self {
        Self {
            api_version: "deckhouse.io/v1alpha1",
            kind: "Module",
            name: name.to_owned(),
        }
    }
}

/// A Warning Event about `regarding`, named for the object and `key` (what it is about, e.g. the
/// reason) so that every run updates the one Event (its time and message) instead of adding another.
pub fn warning_event(regarding: &Regarding, key: &str, reason: &str, message: &str, now: OffsetDateTime) -> Value {
    let time = now.format(&Rfc3339).unwrap_or_default();
    let name = format!("{}.{}.{}", regarding.kind, regarding.name, key).to_lowercase();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": regarding.api_version, "kind": regarding.kind, "name": regarding.name},
        "type": "Warning",
        "reason": reason,
        "message": message,
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "firstTimestamp": time,
        "lastTimestamp": time,
        "count": 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_named_for_its_object_and_reason_and_dated_now() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let event = warning_event(
            &Regarding::node("worker-a"),
            "CDIDisabled",
            "CDIDisabled",
            "no CDI",
            now,
        );
        assert_eq!(event["metadata"]["name"], "node.worker-a.cdidisabled");
        assert_eq!(event["involvedObject"]["kind"], "Node");
        assert_eq!(event["lastTimestamp"], "2027-01-15T08:00:00Z");
        assert_eq!(create_or_update(event.clone())["object"], event);
    }

    #[test]
    fn only_the_schema_keys_are_used() {
        let allowed = [
            "operation",
            "namespace",
            "subresource",
            "apiVersion",
            "kind",
            "name",
            "object",
            "mergePatch",
            "jsonPatch",
            "ignoreMissingObject",
        ];
        for operation in [
            delete("v1", "Node", None, "a"),
            delete("v1", "Secret", Some("d8-gpu"), "b"),
            merge_patch("v1", "Node", "a", json!({})),
            json_patch("v1", "Pod", "team", "p", json!([])),
            merge_patch_status("deckhouse.io/v1alpha1", "Module", "gpu", json!({})),
            create_or_update(json!({})),
        ] {
            for key in operation.as_object().unwrap().keys() {
                assert!(allowed.contains(&key.as_str()), "{key} in {operation}");
            }
        }
    }
}
