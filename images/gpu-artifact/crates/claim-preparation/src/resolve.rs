//! From a ResourceClaim as stored to the devices this node must prepare: our driver's results of
//! the allocation, each on this node's pool and known to the catalog of what we publish.
//!
//! Pure: the caller fetches the claim. Results of other drivers are someone else's (another plugin
//! prepares them); a result of our driver in another pool is a scheduling error we refuse to paper
//! over.

use dra_offers::DeviceCatalog;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::ResourceExt;
use kubelet_plugin::ClaimRef;
use node_prepare::AllocatedDevice;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResolveError {
    #[error("claim {claim} was replaced: the kubelet asked for UID {asked}, the API server has UID {stored}")]
    Replaced {
        claim: String,
        asked: String,
        stored: String,
    },
    #[error("claim {claim} is not allocated")]
    NotAllocated { claim: String },
    #[error("claim {claim} has no device of driver {driver}")]
    NoDeviceOfOurs { claim: String, driver: String },
    #[error("claim {claim}: device {device} is in pool {pool}, but this node publishes pool {ours}")]
    OtherPool {
        claim: String,
        device: String,
        pool: String,
        ours: String,
    },
    #[error(
        "claim {claim}: device {device} is not offered on this node (the card is gone, unhealthy or not ready); offered: {offered}"
    )]
    UnknownDevice {
        claim: String,
        device: String,
        offered: String,
    },
}

/// The devices of `claim` this node prepares, in allocation order.
pub fn resolve_devices(
    asked: &ClaimRef,
    claim: &ResourceClaim,
    driver: &str,
    pool: &str,
    catalog: &DeviceCatalog,
) -> Result<Vec<AllocatedDevice>, ResolveError> {
    let name = format!("{}/{}", asked.namespace, asked.name);
    let stored_uid = claim.uid().unwrap_or_default();
    if stored_uid != asked.uid {
        return Err(ResolveError::Replaced {
            claim: name,
            asked: asked.uid.clone(),
            stored: stored_uid,
        });
    }
    let allocation = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .ok_or_else(|| ResolveError::NotAllocated { claim: name.clone() })?;
    let ours: Vec<_> = allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(|result| result.driver == driver)
        .collect();
    if ours.is_empty() {
        return Err(ResolveError::NoDeviceOfOurs {
            claim: name,
            driver: driver.to_owned(),
        });
    }
    ours.into_iter()
        .map(|result| {
            if result.pool != pool {
                return Err(ResolveError::OtherPool {
                    claim: name.clone(),
                    device: result.device.clone(),
                    pool: result.pool.clone(),
                    ours: pool.to_owned(),
                });
            }
            let target = catalog
                .get(&result.device)
                .cloned()
                .ok_or_else(|| ResolveError::UnknownDevice {
                    claim: name.clone(),
                    device: result.device.clone(),
                    offered: offered_summary(catalog),
                })?;
            Ok(AllocatedDevice {
                request: result.request.clone(),
                pool: result.pool.clone(),
                device: result.device.clone(),
                share_id: result.share_id.clone(),
                target,
            })
        })
        .collect()
}

/// A short list of what is offered, for an error message a user can act on.
fn offered_summary(catalog: &DeviceCatalog) -> String {
    const SHOWN: usize = 8;
    if catalog.is_empty() {
        return "nothing".to_owned();
    }
    let mut names: Vec<&str> = catalog.keys().map(String::as_str).take(SHOWN).collect();
    if catalog.len() > SHOWN {
        names.push("…");
    }
    names.join(", ")
}
