//! The guard on shares that ask for `memory`: the comparison with Go says something about memory
//! only if memory keeps a share off a card now and then, where its `sharePercent` alone would have
//! fit. A case counts when ours, run over the case as it is and over the case without any memory
//! request, takes other devices (or none) for one of its claims.

use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::Value;

use crate::case::Case;
use crate::ours::run;

/// The case with every `memory` capacity request removed (requests and `firstAvailable` subrequests).
fn without_memory(case: &Case) -> Case {
    let mut plain = case.clone();
    for claim in &mut plain.claims {
        for request in claim["spec"]["devices"]["requests"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let exacts: Vec<&mut Value> = match request["firstAvailable"].as_array_mut() {
                Some(subrequests) => subrequests.iter_mut().collect(),
                None => vec![&mut request["exactly"]],
            };
            for exact in exacts {
                if let Some(requests) = exact["capacity"]["requests"].as_object_mut() {
                    requests.remove("memory");
                }
            }
        }
    }
    plain
}

/// The devices an outcome took, `(request, pool, device)`; what a share consumed left out.
fn picks(outcome: &Result<Option<AllocationResult>, String>) -> Option<Vec<(String, String, String)>> {
    let result = outcome.as_ref().ok()?.as_ref()?;
    let results = result.devices.iter().flat_map(|d| d.results.iter().flatten());
    Some(
        results
            .map(|r| (r.request.clone(), r.pool.clone(), r.device.clone()))
            .collect(),
    )
}

/// Whether a share's memory changes what ours allocates for one of the case's claims: another
/// card, or none, where its sharePercent alone would have fit.
pub fn changes_an_allocation(case: &Case, classes: &[Value]) -> bool {
    let asks_memory = case.claims.iter().any(|c| c.to_string().contains("\"memory\":"));
    if !asks_memory {
        return false;
    }
    let with = run(case, classes);
    let without = run(&without_memory(case), classes);
    with.steps
        .iter()
        .zip(&without.steps)
        .any(|(a, b)| picks(&a.outcome) != picks(&b.outcome))
}
