//! From a ResourceClaim as stored to the devices this node must prepare: our driver's results of
//! the allocation, each on this node's pool and known to the catalog of what we publish, each with
//! its share of a shared offer and the opaque config that applies to its request (class configs,
//! then claim configs, the later wins), decoded strictly and checked to fit the device.
//!
//! Pure: the caller fetches the claim. Results of other drivers are someone else's (another plugin
//! prepares them); a result of our driver in another pool is a scheduling error we refuse to paper
//! over.

use dra_offers::DeviceCatalog;
use gpu_api::opaque_config::{InvalidConfig, class_allows_vfio, config_for_request};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kubelet_plugin::ClaimRef;
use node_prepare::AllocatedDevice;

mod device_config;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

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
    #[error("claim {claim}: request {request}, device {device}: {error}")]
    InvalidConfig {
        claim: String,
        request: String,
        device: String,
        error: Box<InvalidConfig>,
    },
    #[error("claim {claim}: request {request}: config {kind} does not fit device {device}: {reason}")]
    ConfigDoesNotFit {
        claim: String,
        request: String,
        device: String,
        kind: &'static str,
        reason: String,
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
    let configs = allocation
        .devices
        .as_ref()
        .and_then(|d| d.config.as_deref())
        .unwrap_or_default();
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
            let config =
                config_for_request(configs, driver, &result.request).map_err(|error| ResolveError::InvalidConfig {
                    claim: name.clone(),
                    request: result.request.clone(),
                    device: result.device.clone(),
                    error: Box::new(error),
                })?;
            if let Some(config) = &config {
                device_config::check_fit(config, &result.device, &target).map_err(|reason| {
                    ResolveError::ConfigDoesNotFit {
                        claim: name.clone(),
                        request: result.request.clone(),
                        device: result.device.clone(),
                        kind: config.kind(),
                        reason,
                    }
                })?;
            }
            Ok(AllocatedDevice {
                request: result.request.clone(),
                pool: result.pool.clone(),
                device: result.device.clone(),
                share_id: result.share_id.clone(),
                share_percent: share_percent(result.consumed_capacity.as_ref()),
                share_memory_bytes: share_memory_bytes(result.consumed_capacity.as_ref()),
                config,
                vfio_allowed: class_allows_vfio(configs, driver, &result.request),
                admin_access: result.admin_access == Some(true),
                target,
            })
        })
        .collect()
}

type Consumed = std::collections::BTreeMap<String, Quantity>;

/// What a share consumed of capacity `qualified`: the scheduler writes the qualified name
/// (`gpu.deckhouse.io/<name>`); an unqualified one means our driver's domain too.
fn consumed<'a>(consumed: Option<&'a Consumed>, qualified: &str) -> Option<&'a Quantity> {
    let consumed = consumed?;
    let unqualified = qualified.rsplit('/').next().unwrap_or(qualified);
    consumed.get(qualified).or_else(|| consumed.get(unqualified))
}

/// The `sharePercent` a share consumed (the scheduler rounds it by the offer's request policy and
/// writes it as a plain integer quantity).
fn share_percent(consumed_capacity: Option<&Consumed>) -> Option<u32> {
    consumed(consumed_capacity, SHARE_PERCENT)?.0.parse().ok()
}

/// The `memory` a share consumed, in bytes, when it asked for some (the offer's policy consumes
/// 0 by default and rounds a request up to whole MiB). The scheduler writes it in any quantity form
/// (`4Gi`, `4096Mi`, plain bytes).
fn share_memory_bytes(consumed_capacity: Option<&Consumed>) -> Option<u64> {
    let quantity = dra_cel::Quantity::parse(&consumed(consumed_capacity, MEMORY)?.0).ok()?;
    u64::try_from(quantity.as_integer()?).ok().filter(|bytes| *bytes > 0)
}

/// The capacity a share of a shared offer consumes.
pub const SHARE_PERCENT: &str = "gpu.deckhouse.io/sharePercent";

/// The memory a share of a shared offer may ask for (counted against the card).
const MEMORY: &str = "gpu.deckhouse.io/memory";

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
