//! One GPUClass reconciled: its DeviceClass brought in line (created, put back after a hand edit,
//! rendered without an extended resource name another class holds, deleted when the class can no
//! longer be rendered, never touched when it is someone else's), then its status from what was found
//! and the device counts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use class_usage::DeviceUsageIndex;
use controller_plumbing::EventPublisher;
use dra_cel::SelectorCache;
use gpu_api::{ClassDeviceCounts, GPUClass, GeneratedObjects};
use gpu_class::ownership::{made_from, resource_holder};
use gpu_class::readiness::{Blocker, ClassFindings, ResourceConflict, ready_condition};
use gpu_class::{Rendered, render};
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use crate::cluster_view::ClusterView;
use crate::device_class_writes;
use crate::status_write::{StatusUpdate, write_status};

pub(crate) struct Context {
    pub classes: Api<GPUClass>,
    pub device_classes: Api<DeviceClass>,
    /// Every GPUClass the controller follows.
    pub class_store: Store<GPUClass>,
    pub view: ClusterView,
    /// Checks selectors as the API server of the cluster's release does.
    pub cel: SelectorCache,
    pub events: EventPublisher,
    /// The usage index of the view's version it was built at: every class of a round shares it.
    pub usage: Mutex<Option<(u64, Arc<DeviceUsageIndex>)>>,
}

pub(crate) async fn reconcile(class: Arc<GPUClass>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    if class.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the DeviceClass through its owner reference.
        return Ok(Action::await_change());
    }
    let name = class.name_any();
    let existing = ctx.view.device_classes.get(&ObjectRef::new(&name));
    let mut findings = ClassFindings {
        name: name.clone(),
        ..ClassFindings::default()
    };
    let mut generated = None;
    let mut selectors = Vec::new();
    match decide(&class, existing.as_deref(), &ctx) {
        Err(blocker) => {
            // A DeviceClass we made must not outlive the spec it was made from.
            if let Some(ours) = existing.as_deref().filter(|dc| made_from(dc, &name))
                && blocker != Blocker::DeviceClassNotManaged
            {
                device_class_writes::delete(&ctx.device_classes, ours).await?;
                tracing::info!(gpuclass = %name, "deleted the DeviceClass of a class that cannot be rendered");
            }
            findings.blocker = Some(blocker);
        }
        Ok((rendered, conflict)) => {
            if let Some(conflict) = &conflict {
                tracing::warn!(gpuclass = %name, resource = %conflict.resource, holder = %conflict.holder,
                    "extended resource name held by another class; rendering the DeviceClass without it");
            }
            findings.conflict = conflict;
            selectors = selector_texts(&rendered.device_class);
            findings.missing_label_keys = rendered.selection.missing_keys.clone();
            match device_class_writes::apply(&ctx.device_classes, &rendered.device_class, existing.as_deref()).await {
                Ok(written) => {
                    if written.is_some() {
                        tracing::info!(gpuclass = %name, "applied its DeviceClass");
                    }
                    let stored = written.as_ref().or(existing.as_deref());
                    let resource = stored.and_then(|dc| dc.spec.extended_resource_name.clone());
                    findings.extended_resource_name = resource.clone();
                    generated = Some(GeneratedObjects {
                        device_class_name: name.clone(),
                        extended_resource_name: resource,
                    });
                }
                // 409: the DeviceClass changed since the cache saw it; the next round sees it.
                Err(kube::Error::Api(status)) if (400..500).contains(&status.code) && status.code != 409 => {
                    findings.blocker = Some(Blocker::ApplyFailed(status.message.clone()));
                }
                Err(error) => return Err(error),
            }
        }
    }
    let usage = ctx.usage_index().usage(&name, &selectors, &ctx.cel);
    findings.selector_error = usage.selector_error.clone();
    findings.counts = ClassDeviceCounts {
        published: if selectors.is_empty() { 0 } else { usage.published },
        allocated: usage.allocated,
        free: if selectors.is_empty() { 0 } else { usage.free },
    };
    let update = StatusUpdate {
        verdict: ready_condition(&findings),
        generated,
        counts: findings.counts,
    };
    write_status(&ctx.classes, &ctx.events, &class, update).await?;
    Ok(Action::await_change())
}

/// Renders the class, or says what stops it: a DeviceClass of its name that is not ours, a spec
/// that cannot be rendered. An extended resource name another class or DeviceClass holds stops
/// nothing: the DeviceClass is rendered without it (two DeviceClasses with one name would leave the
/// scheduler to pick one), and the conflict is returned beside it.
fn decide(
    class: &GPUClass,
    existing: Option<&DeviceClass>,
    ctx: &Context,
) -> Result<(Rendered, Option<ResourceConflict>), Blocker> {
    if existing.is_some_and(|dc| !made_from(dc, &class.name_any())) {
        return Err(Blocker::DeviceClassNotManaged);
    }
    let gpus = ctx.view.physical_gpus.state();
    let gpu_refs: Vec<_> = gpus.iter().map(|g| g.as_ref()).collect();
    let mut rendered = render(class, &gpu_refs, &ctx.cel).map_err(Blocker::Invalid)?;
    let classes = ctx.class_store.state();
    let class_refs: Vec<_> = classes.iter().map(|c| c.as_ref()).collect();
    let device_classes = ctx.view.device_classes.state();
    let device_class_refs: Vec<_> = device_classes.iter().map(|d| d.as_ref()).collect();
    let resource = &rendered.extended_resource_name;
    let conflict = resource_holder(class, resource, &class_refs, &device_class_refs).map(|holder| ResourceConflict {
        resource: resource.clone(),
        holder,
    });
    if conflict.is_some() {
        rendered.device_class.spec.extended_resource_name = None;
    }
    Ok((rendered, conflict))
}

fn selector_texts(device_class: &DeviceClass) -> Vec<String> {
    device_class
        .spec
        .selectors
        .iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
        .collect()
}

impl Context {
    /// The usage index of the view as it is now, built once per version of the view.
    fn usage_index(&self) -> Arc<DeviceUsageIndex> {
        let version = self.view.version();
        let mut cached = self.usage.lock().expect("usage index lock");
        if let Some((built_at, index)) = cached.as_ref()
            && *built_at == version
        {
            return index.clone();
        }
        let slices = self.view.slices.state();
        let claims = self.view.claims.state();
        let index = Arc::new(DeviceUsageIndex::build(
            slices.iter().map(|s| s.as_ref()),
            claims.iter().map(|c| c.as_ref()),
        ));
        *cached = Some((version, index.clone()));
        index
    }
}

pub(crate) fn error_policy(class: Arc<GPUClass>, error: &kube::Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(gpuclass = %class.name_any(), %error, "GPUClass reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
