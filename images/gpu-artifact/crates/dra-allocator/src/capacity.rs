//! Consumable capacity (KEP-5075), as `consumable_capacity.go` of the scheduler computes it:
//! a requested amount is rounded up by the capacity's request policy (validRange min/step,
//! validValues); without a request the policy default, else the whole capacity, is consumed.
//! A device fits when what is already consumed plus this share stays within every capacity.

use std::collections::BTreeMap;

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange};

use crate::device::Capacity;

fn q(value: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<Quantity> {
    Quantity::parse(&value.0).ok()
}

fn round_up_range(requested: Quantity, range: &CapacityRequestPolicyRange) -> Quantity {
    let Some(min) = q(&range.min) else { return requested };
    if requested < min {
        return min;
    }
    match range.step.as_ref().and_then(q) {
        Some(step) => match requested.saturating_sub(min).div_ceil(step) {
            Some(n) => min.saturating_add(step.times(n)),
            None => requested,
        },
        None => requested,
    }
}

fn consumed_for(requested: Option<Quantity>, value: Quantity, policy: Option<&CapacityRequestPolicy>) -> Quantity {
    let Some(requested) = requested else {
        return policy.and_then(|p| p.default.as_ref()).and_then(q).unwrap_or(value);
    };
    match policy {
        Some(p) if p.valid_range.is_some() => round_up_range(requested, p.valid_range.as_ref().expect("checked")),
        Some(p) if p.valid_values.is_some() => p
            .valid_values
            .iter()
            .flatten()
            .filter_map(q)
            .find(|v| requested <= *v)
            .unwrap_or(requested),
        _ => requested,
    }
}

fn violates(consumed: Quantity, policy: Option<&CapacityRequestPolicy>) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.as_ref().and_then(q) == Some(consumed) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.as_ref().and_then(q).is_some_and(|max| consumed > max) {
            return true;
        }
        if let (Some(step), Some(min)) = (range.step.as_ref().and_then(q), q(&range.min)) {
            return consumed
                .saturating_sub(min)
                .div_ceil(step)
                .is_some_and(|n| min.saturating_add(step.times(n)) != consumed);
        }
        return false;
    }
    if let Some(values) = &policy.valid_values {
        return !values.iter().filter_map(q).any(|v| v == consumed);
    }
    false
}

/// What one allocation of `capacity` for a request with `requests` consumes, in the device's
/// capacity order, or `None` when the request cannot be met by this device: it asks for a
/// capacity the device does not have, breaks a request policy, or (with `already`) goes over.
pub(crate) fn consume(
    capacity: &Capacity,
    requests: Option<&BTreeMap<String, Quantity>>,
    already: Option<&[Quantity]>,
) -> Option<Vec<Quantity>> {
    if let Some(requests) = requests
        && requests
            .keys()
            .any(|name| !capacity.0.iter().any(|(n, _, _)| **n == **name))
    {
        return None;
    }
    let mut consumed = Vec::with_capacity(capacity.0.len());
    for (i, (name, value, policy)) in capacity.0.iter().enumerate() {
        let amount = consumed_for(requests.and_then(|r| r.get(&**name)).copied(), *value, policy.as_ref());
        if violates(amount, policy.as_ref()) {
            return None;
        }
        let total = already.map_or(Quantity::ZERO, |a| a[i]).saturating_add(amount);
        if total > *value {
            return None;
        }
        consumed.push(amount);
    }
    Some(consumed)
}
