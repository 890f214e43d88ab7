//! The simulated kubelet's claim cache: which claims are prepared on the node, for which Pods, with
//! which CDI ids. A claim shared by Pods is prepared once and unprepared when its last Pod leaves.

use std::collections::{BTreeMap, BTreeSet};

use crate::dra_client::{ClaimId, PreparedDeviceInfo};
use crate::pod_claims::ReadyClaim;

/// A prepared claim's devices by driver (the kubelet's `ClaimInfo.DriverState`).
pub(crate) type DriverDevices = BTreeMap<String, Vec<PreparedDeviceInfo>>;

#[derive(Debug, Clone)]
pub(crate) struct CachedClaim {
    pub id: ClaimId,
    pub drivers: BTreeSet<String>,
    /// Set once NodePrepareResources succeeded for the claim.
    pub devices: Option<DriverDevices>,
    pub pods: BTreeSet<String>,
}

/// Keyed by claim UID. Callers hold it behind one async lock across their gRPC calls, so prepare
/// and unprepare of one claim never overlap (the kubelet's DRA manager serialises the same way).
#[derive(Debug, Default)]
pub(crate) struct ClaimCache {
    claims: BTreeMap<String, CachedClaim>,
}

impl ClaimCache {
    /// Adds `pod_uid` as a user of `claims`; returns those that still need NodePrepareResources.
    pub(crate) fn use_claims(&mut self, pod_uid: &str, claims: &[ReadyClaim]) -> Vec<ReadyClaim> {
        let mut to_prepare = Vec::new();
        for claim in claims {
            let cached = self.claims.entry(claim.id.uid.clone()).or_insert_with(|| CachedClaim {
                id: claim.id.clone(),
                drivers: claim.drivers.clone(),
                devices: None,
                pods: BTreeSet::new(),
            });
            cached.pods.insert(pod_uid.to_owned());
            if cached.devices.is_none() {
                to_prepare.push(claim.clone());
            }
        }
        to_prepare
    }

    pub(crate) fn set_prepared(&mut self, claim_uid: &str, devices: DriverDevices) {
        if let Some(cached) = self.claims.get_mut(claim_uid) {
            cached.devices = Some(devices);
        }
    }

    /// The CDI ids of a prepared claim's devices, in driver order.
    pub(crate) fn cdi_ids(&self, claim_uid: &str) -> Option<Vec<String>> {
        let devices = self.claims.get(claim_uid)?.devices.as_ref()?;
        Some(devices.values().flatten().flat_map(|d| d.cdi_ids.clone()).collect())
    }

    /// The devices of the prepared claim `namespace/name`.
    pub(crate) fn devices_of(&self, namespace: &str, name: &str) -> Option<DriverDevices> {
        self.claims
            .values()
            .find(|c| c.id.namespace == namespace && c.id.name == name)
            .and_then(|c| c.devices.clone())
    }

    /// Removes `pod_uid` from every claim; returns the claims no Pod uses any more (to unprepare).
    pub(crate) fn release_pod(&mut self, pod_uid: &str) -> Vec<CachedClaim> {
        let mut released = Vec::new();
        for claim in self.claims.values_mut() {
            if claim.pods.remove(pod_uid) && claim.pods.is_empty() {
                released.push(claim.clone());
            }
        }
        released
    }

    /// Whether no Pod uses the claim (a released claim may be taken up again before it is unprepared).
    pub(crate) fn is_unused(&self, claim_uid: &str) -> bool {
        self.claims.get(claim_uid).is_some_and(|c| c.pods.is_empty())
    }

    /// Forgets a claim after a successful NodeUnprepareResources, unless a Pod took it up again.
    pub(crate) fn set_unprepared(&mut self, claim_uid: &str) {
        if self.claims.get(claim_uid).is_some_and(|c| c.pods.is_empty()) {
            self.claims.remove(claim_uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str) -> ReadyClaim {
        ReadyClaim {
            id: ClaimId {
                namespace: "ns".into(),
                name: name.into(),
                uid: format!("uid-{name}"),
            },
            drivers: BTreeSet::from(["gpu.deckhouse.io".to_owned()]),
        }
    }

    #[test]
    fn a_shared_claim_is_prepared_once_and_released_by_its_last_pod() {
        let mut cache = ClaimCache::default();
        assert_eq!(cache.use_claims("pod-a", &[claim("shared")]), vec![claim("shared")]);
        let device = PreparedDeviceInfo {
            request_names: vec![],
            pool: "p".into(),
            device: "gpu0".into(),
            cdi_ids: vec!["cdi/x".into()],
        };
        cache.set_prepared(
            "uid-shared",
            BTreeMap::from([("gpu.deckhouse.io".to_owned(), vec![device])]),
        );
        assert_eq!(cache.cdi_ids("uid-shared"), Some(vec!["cdi/x".to_owned()]));
        assert!(cache.devices_of("ns", "shared").is_some());
        assert!(
            cache.use_claims("pod-b", &[claim("shared")]).is_empty(),
            "already prepared"
        );

        assert!(cache.release_pod("pod-a").is_empty(), "pod-b still uses it");
        let released = cache.release_pod("pod-b");
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].id, claim("shared").id);
        cache.set_unprepared("uid-shared");
        assert_eq!(cache.cdi_ids("uid-shared"), None);
    }

    #[test]
    fn a_failed_prepare_is_tried_again_by_the_next_attempt() {
        let mut cache = ClaimCache::default();
        cache.use_claims("pod-a", &[claim("c")]);
        assert_eq!(cache.use_claims("pod-a", &[claim("c")]), vec![claim("c")]);
    }
}
