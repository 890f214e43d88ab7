//! Writing the DeviceClass of a GPUClass, never someone else's. A new one is created by a
//! server-side apply without force: if a DeviceClass of that name appeared meanwhile with other
//! values, the API server answers with a conflict instead of letting us take it over. One we made is
//! applied with force (taking back fields a hand edit changed) and with its resourceVersion as a
//! precondition, and deleted with its UID and resourceVersion as preconditions.

use gpu_class::ownership::FIELD_MANAGER;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, ResourceExt};

/// Brings the DeviceClass to `desired`. `existing` is ours or absent; `None` is returned when it is
/// already as desired.
pub(crate) async fn apply(
    api: &Api<DeviceClass>,
    desired: &DeviceClass,
    existing: Option<&DeviceClass>,
) -> Result<Option<DeviceClass>, kube::Error> {
    let name = desired.name_any();
    let mut body = desired.clone();
    let params = match existing {
        Some(existing) if up_to_date(desired, existing) => return Ok(None),
        Some(existing) => {
            body.metadata.resource_version = existing.resource_version();
            PatchParams::apply(FIELD_MANAGER).force()
        }
        None => PatchParams::apply(FIELD_MANAGER),
    };
    api.patch(&name, &params, &Patch::Apply(&body)).await.map(Some)
}

/// Deletes a DeviceClass we made, unless it changed since we looked.
pub(crate) async fn delete(api: &Api<DeviceClass>, existing: &DeviceClass) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.uid(),
            resource_version: existing.resource_version(),
        }),
        ..DeleteParams::background()
    };
    match api.delete(&existing.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

/// Whether `existing` already says everything `desired` says: the same spec, our labels,
/// annotations and owner. An extended resource name the server dropped (gate off) differs, so it is
/// applied again on the next change, a no-op for that server.
fn up_to_date(desired: &DeviceClass, existing: &DeviceClass) -> bool {
    let (want, have) = (&desired.spec, &existing.spec);
    let resource_same = have.extended_resource_name == want.extended_resource_name;
    let spec_same = want.selectors == have.selectors
        && serde_json::to_value(&want.config).ok() == serde_json::to_value(&have.config).ok()
        && resource_same;
    let contains = |want: &Option<std::collections::BTreeMap<String, String>>,
                    have: &Option<std::collections::BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(key, value)| have.as_ref().and_then(|h| h.get(key)) == Some(value))
    };
    let owners_same = desired.owner_references() == existing.owner_references();
    spec_same
        && owners_same
        && contains(&desired.metadata.labels, &existing.metadata.labels)
        && contains(&desired.metadata.annotations, &existing.metadata.annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{CELDeviceSelector, DeviceSelector};

    fn class(expression: &str) -> DeviceClass {
        let mut dc = DeviceClass::default();
        dc.metadata.name = Some("a30".into());
        dc.metadata.labels = Some([("module".to_owned(), "gpu".to_owned())].into());
        dc.spec.selectors = Some(vec![DeviceSelector {
            cel: Some(CELDeviceSelector {
                expression: expression.into(),
            }),
        }]);
        dc.spec.extended_resource_name = Some("gpu.deckhouse.io/a30".into());
        dc
    }

    #[test]
    fn a_hand_edit_of_the_spec_or_our_labels_is_not_up_to_date_but_extra_labels_are() {
        let desired = class("true");
        let mut existing = desired.clone();
        existing.metadata.resource_version = Some("7".into());
        existing
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "ml".into());
        assert!(up_to_date(&desired, &existing));
        existing.spec.selectors = class("false").spec.selectors;
        assert!(!up_to_date(&desired, &existing));
        let mut unlabelled = desired.clone();
        unlabelled.metadata.labels = None;
        assert!(!up_to_date(&desired, &unlabelled));
        let mut dropped = desired.clone();
        dropped.spec.extended_resource_name = None;
        assert!(!up_to_date(&desired, &dropped));
    }
}
