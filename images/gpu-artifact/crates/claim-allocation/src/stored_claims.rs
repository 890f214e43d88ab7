//! What the claim store keeps of each claim. A claim not yet allocated is kept as a lean
//! `ResourceClaim` (see `lean_objects`): the engine allocates it from its spec and the Pending
//! reasons read it. An allocated claim is read by the rounds only for which devices of our driver
//! it holds, what its requests' classes are, and whether it is reserved or prepared; it is kept in
//! a record of exactly that (a `ResourceClaim` is 576 bytes before any field is set, and each of
//! its lists and strings is a heap allocation more). Nothing allocates an allocated claim again
//! unless it is deallocated, and then the watch brings it back whole.

use std::sync::Arc;

use dra_allocator::GPU_DRIVER;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Resource;

use crate::double_allocation::ClaimFacts;
use crate::lean_objects::lean_claim;

/// One claim as the store keeps it.
#[derive(Clone, Debug)]
pub enum StoredClaim {
    Pending(Arc<ResourceClaim>),
    Allocated(Arc<AllocatedClaim>),
}

/// An allocated claim: who it is, what it holds of our driver, and its requests' classes.
#[derive(Debug, PartialEq)]
pub struct AllocatedClaim {
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub resource_version: Box<str>,
    pub facts: ClaimFacts,
    /// The allocation's results of our driver.
    pub held: Box<[HeldDevice]>,
    /// Each request (`request`, or `request/subrequest` for a `firstAvailable` entry) with its
    /// class, as the allocation metrics label a result.
    pub classes: Box<[(Box<str>, Box<str>)]>,
    /// The uids of its consumers (`status.reservedFor`): whom preemption would have to evict for
    /// its devices to come back (`preemption`).
    pub reservers: Box<[Box<str>]>,
}

/// One result of our driver: the request it answers and the device.
#[derive(Debug, PartialEq)]
pub struct HeldDevice {
    pub request: Box<str>,
    pub pool: Box<str>,
    pub device: Box<str>,
}

fn boxed(text: &Option<String>) -> Box<str> {
    text.as_deref().unwrap_or_default().into()
}

impl HeldDevice {
    /// `pool/device`, as Events and the audit name a device.
    pub fn path(&self) -> String {
        format!("{}/{}", self.pool, self.device)
    }
}

impl AllocatedClaim {
    /// The record of `claim`, allocated or not (then it holds nothing).
    pub fn of(claim: &ResourceClaim) -> AllocatedClaim {
        let results = claim
            .status
            .iter()
            .flat_map(|s| s.allocation.iter())
            .flat_map(|a| a.devices.iter())
            .flat_map(|d| d.results.iter().flatten());
        // A result with admin access holds nothing (the scheduler's allocated state leaves it out):
        // it is no one's GPU time, no MPS tenant of its card, and never a victim or a double holder.
        let held = results
            .filter(|r| r.driver == GPU_DRIVER && r.admin_access != Some(true))
            .map(|r| HeldDevice {
                request: r.request.as_str().into(),
                pool: r.pool.as_str().into(),
                device: r.device.as_str().into(),
            })
            .collect();
        let mut classes = vec![];
        for request in claim.spec.devices.iter().flat_map(|d| d.requests.iter().flatten()) {
            if let Some(exactly) = &request.exactly {
                classes.push((request.name.as_str().into(), exactly.device_class_name.as_str().into()));
            }
            for sub in request.first_available.iter().flatten() {
                let name = format!("{}/{}", request.name, sub.name);
                classes.push((name.into(), sub.device_class_name.as_str().into()));
            }
        }
        let meta = &claim.metadata;
        AllocatedClaim {
            namespace: boxed(&meta.namespace),
            name: boxed(&meta.name),
            uid: boxed(&meta.uid),
            resource_version: boxed(&meta.resource_version),
            facts: ClaimFacts::of(claim),
            held,
            classes: classes.into_boxed_slice(),
            reservers: claim
                .status
                .iter()
                .flat_map(|s| s.reserved_for.iter().flatten())
                .map(|r| r.uid.as_str().into())
                .collect(),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The class of `request` (as a result names it), if the claim has that request.
    pub fn class_of(&self, request: &str) -> Option<&str> {
        self.classes
            .iter()
            .find(|(name, _)| &**name == request)
            .map(|(_, class)| &**class)
    }

    /// The reference an Event about this claim carries (as `Resource::object_ref` makes it).
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(ResourceClaim::api_version(&()).into_owned()),
            kind: Some(ResourceClaim::kind(&()).into_owned()),
            namespace: Some(self.namespace.to_string()),
            name: Some(self.name.to_string()),
            uid: Some(self.uid.to_string()),
            ..ObjectReference::default()
        }
    }
}

impl StoredClaim {
    /// What the store keeps of `claim`.
    pub fn of(mut claim: ResourceClaim) -> StoredClaim {
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            StoredClaim::Allocated(Arc::new(AllocatedClaim::of(&claim)))
        } else {
            lean_claim(&mut claim);
            StoredClaim::Pending(Arc::new(claim))
        }
    }

    /// The claim not yet allocated, if it is one.
    pub fn pending(&self) -> Option<&Arc<ResourceClaim>> {
        match self {
            StoredClaim::Pending(claim) => Some(claim),
            StoredClaim::Allocated(_) => None,
        }
    }

    /// The allocated claim, if it is one.
    pub fn allocated(&self) -> Option<&Arc<AllocatedClaim>> {
        match self {
            StoredClaim::Allocated(claim) => Some(claim),
            StoredClaim::Pending(_) => None,
        }
    }

    pub fn namespace(&self) -> &str {
        match self {
            StoredClaim::Pending(claim) => claim.metadata.namespace.as_deref().unwrap_or_default(),
            StoredClaim::Allocated(claim) => &claim.namespace,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            StoredClaim::Pending(claim) => claim.metadata.name.as_deref().unwrap_or_default(),
            StoredClaim::Allocated(claim) => &claim.name,
        }
    }

    pub fn uid(&self) -> &str {
        match self {
            StoredClaim::Pending(claim) => claim.metadata.uid.as_deref().unwrap_or_default(),
            StoredClaim::Allocated(claim) => &claim.uid,
        }
    }

    /// How the engine names the claim: its uid, else `namespace/name` (see `dra_allocator::claim_id`).
    pub fn id(&self) -> String {
        match self.uid() {
            "" => format!("{}/{}", self.namespace(), self.name()),
            uid => uid.to_owned(),
        }
    }
}

#[cfg(test)]
#[path = "stored_claims_tests.rs"]
mod tests;
