//! Which claims gave their devices of our driver back since the last round: a claim seen allocated
//! that is still there but no longer allocated (the resourceclaim controller deallocates a claim
//! once nothing uses it). Users learn it from a `Released` Event naming the devices.
//!
//! Pure bookkeeping: it never writes, and a claim that was deleted is forgotten without a report
//! (an Event about an object that no longer exists helps nobody).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::stored_claims::{AllocatedClaim, HeldDevice, StoredClaim};

/// Every claim seen holding devices of our driver in the last round, as the store had it (a
/// pointer each).
#[derive(Default)]
pub struct Releases {
    held: HashSet<ByUid>,
}

/// An allocated claim found by its uid.
struct ByUid(Arc<AllocatedClaim>);

impl Borrow<str> for ByUid {
    fn borrow(&self) -> &str {
        &self.0.uid
    }
}

impl Hash for ByUid {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.uid.hash(state)
    }
}

impl PartialEq for ByUid {
    fn eq(&self, other: &Self) -> bool {
        self.0.uid == other.0.uid
    }
}

impl Eq for ByUid {}

/// One claim that released devices, with the devices (`pool/device`).
#[derive(Debug, PartialEq)]
pub struct Released {
    pub claim: Arc<ResourceClaim>,
    pub devices: Vec<String>,
}

impl Releases {
    /// Records this round's claims and returns those that held devices of our driver in the last
    /// round and hold none now. The first round reports nothing: it has no last round.
    pub fn update(&mut self, claims: &[StoredClaim]) -> Vec<Released> {
        let mut held = HashSet::new();
        let mut released = vec![];
        for claim in claims {
            match claim {
                StoredClaim::Allocated(claim) if !claim.held.is_empty() => {
                    held.insert(ByUid(claim.clone()));
                }
                StoredClaim::Allocated(_) => {}
                StoredClaim::Pending(claim) => {
                    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
                    if let Some(before) = self.held.get(uid) {
                        let devices = before.0.held.iter().map(HeldDevice::path);
                        released.push(Released {
                            claim: claim.clone(),
                            devices: devices.collect(),
                        });
                    }
                }
            }
        }
        self.held = held;
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_allocator::GPU_DRIVER;
    use serde_json::json;

    fn claim(uid: &str, driver: Option<&str>) -> StoredClaim {
        let mut value = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("c-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"devices": {"requests": []}}});
        if let Some(driver) = driver {
            value["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": "gpus/n1", "device": "gpu0"}]}}});
        }
        StoredClaim::of(serde_json::from_value(value).unwrap())
    }

    #[test]
    fn a_claim_that_lost_its_allocation_is_reported_once_with_its_devices() {
        let mut releases = Releases::default();
        assert_eq!(releases.update(&[claim("a", Some(GPU_DRIVER))]), vec![]);
        let now = claim("a", None);
        assert_eq!(
            releases.update(std::slice::from_ref(&now)),
            vec![Released {
                claim: now.pending().unwrap().clone(),
                devices: vec!["gpus/n1/gpu0".to_owned()]
            }]
        );
        assert_eq!(releases.update(&[now]), vec![], "reported once");
    }

    #[test]
    fn deleted_claims_other_drivers_and_the_first_round_report_nothing() {
        let mut releases = Releases::default();
        assert_eq!(
            releases.update(&[claim("a", None), claim("b", Some("other.example.com"))]),
            vec![]
        );
        assert_eq!(releases.update(&[claim("b", None)]), vec![], "b was never ours");
        releases.update(&[claim("c", Some(GPU_DRIVER))]);
        assert_eq!(releases.update(&[]), vec![], "c was deleted");
    }
}
