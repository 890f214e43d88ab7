//! The simulated kubelet's DRA manager: one prepare attempt for a Pod (resolve its claims, call
//! each driver's plugin for the claims not prepared yet) and one unprepare attempt for released claims.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;

use crate::claim_cache::{CachedClaim, DriverDevices};
use crate::dra_client::ClaimId;
use crate::pod_claims::{pod_claim_names, ready_claim};
use crate::sim::SimShared;

/// Why an attempt did not prepare the Pod.
pub(crate) enum NotPrepared {
    /// Claims not generated, allocated or reserved yet: look again soon, no Event.
    Waiting(String),
    /// A plugin failed or could not be called: an Event, then retry with backoff.
    Failed(String),
}

/// Claim name -> CDI ids of every claim of the Pod, once all are prepared.
pub(crate) async fn prepare_pod(shared: &SimShared, pod: &Pod) -> Result<BTreeMap<String, Vec<String>>, NotPrepared> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    let names = pod_claim_names(pod).map_err(NotPrepared::Waiting)?;
    let claims_api = Api::<ResourceClaim>::namespaced(shared.client.clone(), &namespace);
    let mut ready = Vec::new();
    for name in &names {
        let claim = claims_api
            .get_opt(name)
            .await
            .map_err(|error| NotPrepared::Waiting(format!("reading ResourceClaim {namespace}/{name}: {error}")))?
            .ok_or_else(|| NotPrepared::Waiting(format!("ResourceClaim {namespace}/{name} does not exist yet")))?;
        ready.push(ready_claim(&claim, pod).map_err(NotPrepared::Waiting)?);
    }

    let mut cache = shared.cache.lock().await;
    let to_prepare = cache.use_claims(&pod_uid, &ready);
    let mut errors = Vec::new();
    let mut devices: BTreeMap<ClaimId, DriverDevices> = BTreeMap::new();
    let mut failed: BTreeSet<ClaimId> = BTreeSet::new();
    for (driver, claims) in by_driver(to_prepare.iter().map(|c| (&c.id, &c.drivers))) {
        shared.count_calls(&claims, |counts| counts.prepare += 1);
        let outcome = match shared.plugins.client(&driver) {
            Ok(client) => client.prepare(&claims, shared.options.call_timeout).await,
            Err(error) => Err(vec![error]),
        };
        match outcome {
            Ok(prepared) => prepared.into_iter().for_each(|(claim, prepared)| {
                devices.entry(claim).or_default().insert(driver.clone(), prepared);
            }),
            Err(driver_errors) => {
                failed.extend(claims);
                errors.extend(driver_errors);
            }
        }
    }
    for claim in to_prepare.iter().filter(|c| !failed.contains(&c.id)) {
        cache.set_prepared(&claim.id.uid, devices.remove(&claim.id).unwrap_or_default());
    }
    if !errors.is_empty() {
        return Err(NotPrepared::Failed(format!(
            "Failed to prepare dynamic resources: {}",
            errors.join("; ")
        )));
    }
    Ok(ready
        .iter()
        .map(|claim| (claim.id.name.clone(), cache.cdi_ids(&claim.id.uid).unwrap_or_default()))
        .collect())
}

/// Unprepares those of `claims` that are still unused; returns the ones that failed, with the errors.
pub(crate) async fn unprepare_claims(
    shared: &SimShared,
    claims: Vec<CachedClaim>,
) -> Result<(), (Vec<CachedClaim>, String)> {
    let mut cache = shared.cache.lock().await;
    let claims: Vec<CachedClaim> = claims.into_iter().filter(|c| cache.is_unused(&c.id.uid)).collect();
    let mut errors = Vec::new();
    let mut failed: BTreeSet<ClaimId> = BTreeSet::new();
    for (driver, ids) in by_driver(claims.iter().map(|c| (&c.id, &c.drivers))) {
        shared.count_calls(&ids, |counts| counts.unprepare += 1);
        let outcome = match shared.plugins.client(&driver) {
            Ok(client) => client.unprepare(&ids, shared.options.call_timeout).await,
            Err(error) => Err(vec![error]),
        };
        if let Err(driver_errors) = outcome {
            failed.extend(ids);
            errors.extend(driver_errors);
        }
    }
    let (failed, done): (Vec<_>, Vec<_>) = claims.into_iter().partition(|c| failed.contains(&c.id));
    for claim in done {
        cache.set_unprepared(&claim.id.uid);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err((
            failed,
            format!("Failed to unprepare dynamic resources: {}", errors.join("; ")),
        ))
    }
}

/// Claims grouped by the drivers of their allocation results (a claim may need several plugins).
fn by_driver<'a>(claims: impl Iterator<Item = (&'a ClaimId, &'a BTreeSet<String>)>) -> BTreeMap<String, Vec<ClaimId>> {
    let mut grouped: BTreeMap<String, Vec<ClaimId>> = BTreeMap::new();
    for (claim, drivers) in claims {
        for driver in drivers {
            grouped.entry(driver.clone()).or_default().push(claim.clone());
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_claims::ReadyClaim;

    fn claim(name: &str, drivers: &[&str]) -> ReadyClaim {
        ReadyClaim {
            id: ClaimId {
                namespace: "ns".into(),
                name: name.into(),
                uid: name.into(),
            },
            drivers: drivers.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn a_claim_with_two_drivers_goes_to_both() {
        let claims = [claim("a", &["gpu"]), claim("b", &["gpu", "nic"])];
        let grouped = by_driver(claims.iter().map(|c| (&c.id, &c.drivers)));
        let names = |d: &str| grouped[d].iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("gpu"), vec!["a", "b"]);
        assert_eq!(names("nic"), vec!["b"]);
    }
}
