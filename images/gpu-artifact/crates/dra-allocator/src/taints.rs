//! Device taints and request tolerations, as `resourceclaim.ToleratesTaint`: every taint of a
//! device must be tolerated by some toleration of the request.

use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration};

fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

pub(crate) fn all_tolerated(taints: &[DeviceTaint], tolerations: &[DeviceToleration]) -> bool {
    taints
        .iter()
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}
