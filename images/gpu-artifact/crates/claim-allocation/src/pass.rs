//! One allocation round over the current stores: allocate what is ours to allocate, write it
//! without overwriting anyone, remove gates, audit everything, and tell users through Events.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use controller_plumbing::EventPublisher;
use dra_allocator::Allocator;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::FIELD_MANAGER;
use crate::metrics::{Metrics, allocation_counts};
use crate::releases::Releases;
use crate::selection::{SCHEDULING_GATE, plan};

/// What a round sees.
pub struct Snapshot {
    pub claims: Vec<Arc<ResourceClaim>>,
    pub slices: Vec<Arc<ResourceSlice>>,
    pub classes: Vec<Arc<DeviceClass>>,
    pub pods: Vec<Arc<Pod>>,
}

/// State kept between rounds so Events are not repeated on every round.
#[derive(Default)]
pub struct Memory {
    last_reason: HashMap<String, String>,
    reported_violations: HashSet<String>,
    releases: Releases,
}

pub struct Round<'a> {
    pub client: &'a Client,
    pub events: &'a EventPublisher,
    pub metrics: &'a Metrics,
    pub memory: &'a mut Memory,
}

enum Written {
    Yes,
    SomeoneElse,
}

impl Round<'_> {
    pub async fn run(&mut self, snapshot: &Snapshot) -> anyhow::Result<()> {
        let slices: Vec<ResourceSlice> = snapshot.slices.iter().map(|s| (**s).clone()).collect();
        let classes: Vec<DeviceClass> = snapshot.classes.iter().map(|c| (**c).clone()).collect();
        let allocated: Vec<ResourceClaim> = snapshot
            .claims
            .iter()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.allocation.is_some()))
            .map(|c| (**c).clone())
            .collect();
        for released in self.memory.releases.update(&snapshot.claims) {
            let note = format!("released {}", released.devices.join(", "));
            tracing::info!(claim = %claim_key(&released.claim), %note);
            self.events
                .normal(&reference(&released.claim), "Released", "Deallocate", note)
                .await;
        }
        let mut allocator = Allocator::new(&slices, &classes, &allocated);
        self.metrics.ignored_slices.set(allocator.ignored_slices().len() as i64);
        let by_name = snapshot.classes.iter().map(|c| (c.name_any(), c.clone())).collect();
        let work = plan(&snapshot.claims, &snapshot.pods, &by_name);
        let mut newly = vec![];

        for claim in &work.standalone {
            if let Some(allocation) = self.try_allocate(&mut allocator, claim, None).await
                && let Written::Yes = self.write(claim, &allocation).await?
            {
                allocator.commit(&allocation);
                newly.push(with_allocation(claim, allocation));
            }
        }
        for gated in &work.gated {
            let mut node: Option<Node> = None;
            let mut results = vec![];
            for claim in &gated.claims {
                let Some(allocation) = self.try_allocate(&mut allocator, claim, node.as_ref()).await else {
                    break;
                };
                node = node.or_else(|| allocation_node(&allocation));
                results.push((claim.clone(), allocation));
            }
            if results.len() != gated.claims.len() {
                continue;
            }
            if results.is_empty() {
                // Every claim is allocated and our watch has seen it: only now lift the gate, so the
                // scheduler (whose claim informer sees the same stream) finds the allocation when it
                // picks the Pod up. Lifting it in the round that wrote the allocation lets the
                // scheduler race our write and try to allocate the claim itself.
                self.ungate(&gated.pod).await?;
                continue;
            }
            for (claim, allocation) in results {
                if let Written::Yes = self.write(&claim, &allocation).await? {
                    allocator.commit(&allocation);
                    newly.push(with_allocation(&claim, allocation));
                }
            }
        }

        let mut everything = allocated;
        everything.extend(newly);
        self.metrics.set_allocations(&allocation_counts(&everything, &slices));
        for violation in allocator.audit(&everything) {
            let key = violation.to_string();
            if self.memory.reported_violations.insert(key.clone()) {
                self.metrics.violations.inc();
                tracing::error!(%violation, "safety invariant violated");
                if let Some(claim) = everything.iter().find(|c| claim_key(c) == violation.claim) {
                    self.events
                        .warning(&reference(claim), "InvariantViolated", "Audit", key)
                        .await;
                }
            }
        }
        Ok(())
    }

    async fn try_allocate(
        &mut self,
        allocator: &mut Allocator,
        claim: &ResourceClaim,
        node: Option<&Node>,
    ) -> Option<AllocationResult> {
        let reason = match allocator.allocate(claim, node) {
            Ok(Some(allocation)) => return Some(allocation),
            Ok(None) => allocator.unsatisfiable_reason().unwrap_or("no device fits").to_owned(),
            Err(error) => error.to_string(),
        };
        let uid = claim.uid().unwrap_or_default();
        if self.memory.last_reason.get(&uid) != Some(&reason) {
            tracing::info!(claim = %claim_key(claim), %reason, "cannot allocate");
            self.events
                .warning(&reference(claim), "CannotAllocate", "Allocate", reason.clone())
                .await;
            self.memory.last_reason.insert(uid, reason);
        }
        None
    }

    /// Writes `status.allocation` against the resourceVersion we read. A conflict means another
    /// writer (the scheduler) got there first: we keep theirs.
    async fn write(&mut self, claim: &ResourceClaim, allocation: &AllocationResult) -> anyhow::Result<Written> {
        let api = Api::<ResourceClaim>::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default());
        // The scheduler stamps every allocation it makes; on servers with binding conditions (1.36+)
        // it adds a missing stamp at PreBind, which the API server refuses as a change of the
        // allocation. So an allocation we write carries its stamp from the start (servers without
        // the gate drop the field).
        let mut allocation = allocation.clone();
        allocation.allocation_timestamp = Some(Time(Timestamp::now()));
        let updated = with_allocation(claim, allocation.clone());
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match api.replace_status(&claim.name_any(), &params, &updated).await {
            Ok(_) => {
                let devices: Vec<_> = allocation
                    .devices
                    .iter()
                    .flat_map(|d| d.results.iter().flatten())
                    .map(|r| format!("{}/{}", r.pool, r.device))
                    .collect();
                let note = format!("allocated {}", devices.join(", "));
                tracing::info!(claim = %claim_key(claim), %note);
                if let Some(created) = &claim.metadata.creation_timestamp {
                    let seconds = Timestamp::now().duration_since(created.0).as_secs_f64();
                    self.metrics.latency.observe(seconds.max(0.0));
                }
                self.memory.last_reason.remove(&claim.uid().unwrap_or_default());
                self.events
                    .normal(&reference(claim), "Allocated", "Allocate", note)
                    .await;
                Ok(Written::Yes)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::info!(claim = %claim_key(claim), "claim changed while allocating; keeping the other writer's result");
                Ok(Written::SomeoneElse)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Removes our gate, keeping the others, guarded by the Pod's resourceVersion.
    async fn ungate(&self, pod: &Pod) -> anyhow::Result<()> {
        let remaining: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.scheduling_gates.iter().flatten())
            .filter(|g| g.name != SCHEDULING_GATE)
            .cloned()
            .collect();
        let patch =
            json!({"metadata": {"resourceVersion": pod.resource_version()}, "spec": {"schedulingGates": remaining}});
        let api = Api::<Pod>::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        match api
            .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // The Pod changed; the next round sees it again (its claims are allocated by then).
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

fn with_allocation(claim: &ResourceClaim, allocation: AllocationResult) -> ResourceClaim {
    let mut updated = claim.clone();
    updated.status.get_or_insert_with(Default::default).allocation = Some(allocation);
    updated
}

/// The node an allocation is pinned to (`matchFields metadata.name`), as a Node for the next claim.
fn allocation_node(allocation: &AllocationResult) -> Option<Node> {
    let term = allocation.node_selector.as_ref()?.node_selector_terms.first()?;
    let name = term
        .match_fields
        .iter()
        .flatten()
        .find(|f| f.key == "metadata.name")?
        .values
        .as_ref()?
        .first()?
        .clone();
    let mut node = Node::default();
    node.metadata.name = Some(name);
    Some(node)
}

fn claim_key(claim: &ResourceClaim) -> String {
    format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any())
}

fn reference(claim: &ResourceClaim) -> ObjectReference {
    claim.object_ref(&())
}
