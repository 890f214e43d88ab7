//! Shapes the chosen devices into an `AllocationResult` the way the scheduler writes it:
//! results in request order, `shareID` and `consumedCapacity` for shares of multi-allocatable
//! devices, tolerations copied, class configs once per class then claim configs, and the node
//! selector.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher, RandomState};

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequestAllocationResult,
    ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::inventory::Inventory;
use crate::node_selection::allocation_node_selector;
use crate::request::Request;
use crate::search::Pick;

/// A fresh lowercase RFC 4122 version-4 UUID for a share. Uniqueness is what matters (the
/// scheduler uses random UUIDs); `RandomState` gives per-process random keys without an RNG
/// dependency, and the counter makes each call distinct.
pub(crate) fn new_share_id(counter: u64) -> String {
    let state = RandomState::new();
    let mut a = state.build_hasher();
    a.write_u64(counter);
    let mut b = state.build_hasher();
    b.write_u64(!counter);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.finish().to_le_bytes());
    bytes[8..].copy_from_slice(&b.finish().to_le_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

pub(crate) fn build(
    inventory: &Inventory,
    claim: &ResourceClaim,
    requests: &[Request<'_>],
    picks: &[Pick],
    node_name: &str,
    share_counter: &mut u64,
) -> AllocationResult {
    let mut results = Vec::with_capacity(picks.len());
    for pick in picks {
        let device = inventory.device(pick.device);
        let alternative = &requests[pick.request].alternatives[pick.alternative];
        let pool = inventory.pool(device.pool);
        let (share_id, consumed_capacity) = match &pick.consumed {
            Some(consumed) => {
                *share_counter += 1;
                let map: BTreeMap<String, K8sQuantity> = device
                    .raw
                    .kind
                    .capacity
                    .0
                    .iter()
                    .zip(consumed)
                    .map(|((name, _, _), q)| (name.to_string(), K8sQuantity(q.to_decimal_string())))
                    .collect();
                (Some(new_share_id(*share_counter)), Some(map))
            }
            None => (None, None),
        };
        results.push(DeviceRequestAllocationResult {
            request: alternative.result_name.clone(),
            driver: pool.driver.to_string(),
            pool: pool.name.to_string(),
            device: device.raw.name().to_string(),
            admin_access: alternative.admin.then_some(true),
            tolerations: (!alternative.tolerations.is_empty()).then(|| alternative.tolerations.to_vec()),
            share_id,
            consumed_capacity,
            ..Default::default()
        });
    }

    let mut config = Vec::new();
    // Class configs: once per class, naming every request that used the class.
    let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
    for (r, request) in requests.iter().enumerate() {
        let Some(pick) = picks.iter().find(|p| p.request == r) else {
            continue;
        };
        let alternative = &request.alternatives[pick.alternative];
        let class_name = alternative.class.metadata.name.as_deref().unwrap_or_default();
        if let Some((start, end)) = class_ranges.get(class_name) {
            for entry in &mut config[*start..*end] {
                let entry: &mut DeviceAllocationConfiguration = entry;
                entry
                    .requests
                    .get_or_insert_with(Vec::new)
                    .push(alternative.result_name.clone());
            }
            continue;
        }
        let start = config.len();
        for class_config in alternative.class.spec.config.iter().flatten() {
            config.push(DeviceAllocationConfiguration {
                source: "FromClass".to_owned(),
                requests: Some(vec![alternative.result_name.clone()]),
                opaque: class_config.opaque.clone(),
            });
        }
        class_ranges.insert(class_name, (start, config.len()));
    }
    // Claim configs: as the scheduler does, once per request the config names.
    for claim_config in claim.spec.devices.iter().flat_map(|d| d.config.iter().flatten()) {
        let named = claim_config.requests.as_deref().unwrap_or_default();
        let entry = || DeviceAllocationConfiguration {
            source: "FromClaim".to_owned(),
            requests: claim_config.requests.clone(),
            opaque: claim_config.opaque.clone(),
        };
        if named.is_empty() {
            config.push(entry());
            continue;
        }
        for (r, request) in requests.iter().enumerate() {
            let chosen = picks
                .iter()
                .find(|p| p.request == r)
                .map(|p| &request.alternatives[p.alternative]);
            let by_sub = chosen.is_some_and(|a| a.sub_name.is_some() && named.contains(&a.result_name));
            if named.iter().any(|n| n == request.name) || by_sub {
                config.push(entry());
            }
        }
    }

    AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: (!config.is_empty()).then_some(config),
        }),
        node_selector: allocation_node_selector(picks.iter().filter_map(|p| inventory.binding_of(p.device)), node_name),
        allocation_timestamp: None,
    }
}
