//! The searches of one claim in one scope: the depth-first search over the candidates, and before
//! it, on a node, the search of a multi-device request restricted to each of its topology groups
//! in turn (see `topology`). The unrestricted search stays the fallback with its full budget, so
//! topology never makes a claim unsatisfiable; a group that does not fit quickly is given up. Such
//! a claim's solution on a node nobody uses yet is marked, so that nodes in use are filled first
//! (see `best_fit`): topology never opens a node that packing would not.

use k8s_openapi::api::resource::v1::DeviceConstraint;

use crate::allocate::SEARCH_BUDGET;
use crate::allocator::Allocator;
use crate::best_fit::score;
use crate::constraint::Constraint;
use crate::fast_hash::FastSet;
use crate::memo::Outcome;
use crate::request::Request;
use crate::scope::Scope;
use crate::search::{BudgetExceeded, Search};
use crate::topology;

/// Steps of one search restricted to a topology group.
const GROUP_BUDGET: u64 = SEARCH_BUDGET / 20;

impl Allocator {
    /// On one node, the first solution of a multi-device request within one of its groups,
    /// closest and tightest first; `None` when there is no such request or no group holds it.
    pub(crate) fn search_grouped(
        &mut self,
        requests: &[Request<'_>],
        candidates: &[Vec<Vec<u32>>],
        constraints: &[DeviceConstraint],
        scope: Scope<'_>,
    ) -> Option<Outcome> {
        let Scope::Node { .. } = scope else {
            return None;
        };
        let r = topology::grouped_request(requests)?;
        for group in self.topology_groups(&requests[r], &candidates[r]) {
            let restricted = restrict(candidates, requests, r, &group);
            if let Ok(Some(found)) = self.search_once(requests, &restricted, constraints, GROUP_BUDGET) {
                return Some(found);
            }
        }
        None
    }

    /// `outcome` on `scope`, marked when it is a multi-device claim's first allocation on its node.
    pub(crate) fn mark_opening(&self, outcome: Outcome, requests: &[Request<'_>], scope: Scope<'_>) -> Outcome {
        match outcome {
            Outcome::Found(picks, mut fit)
                if matches!(scope, Scope::Node { .. }) && topology::grouped_request(requests).is_some() =>
            {
                let devices = self.reach.scope_devices(&self.inventory, scope);
                let in_use = devices
                    .iter()
                    .any(|slot| self.usage.is_exclusive(*slot) || self.usage.shares.contains_key(slot));
                fit.3.0 = !in_use;
                Outcome::Found(picks, fit)
            }
            other => other,
        }
    }

    /// One depth-first search over `candidates` with `budget` steps; nothing stays taken.
    pub(crate) fn search_once(
        &mut self,
        requests: &[Request<'_>],
        candidates: &[Vec<Vec<u32>>],
        constraints: &[DeviceConstraint],
        budget: u64,
    ) -> Result<Option<Outcome>, BudgetExceeded> {
        let mut search = Search::new(
            &self.inventory,
            &mut self.usage,
            requests,
            candidates,
            Constraint::from_claim(constraints),
            budget,
        );
        let found = search.run().map(|found| {
            found.then(|| {
                Outcome::Found(
                    search.picks.clone(),
                    score(search.inventory, search.usage, &search.picks),
                )
            })
        });
        search.release_all();
        found
    }

    /// The groups a request's multi-device alternatives are restricted to in turn.
    fn topology_groups(&self, request: &Request<'_>, candidates: &[Vec<u32>]) -> Vec<Vec<u32>> {
        let mut union: Vec<u32> = Vec::new();
        let mut seen = FastSet::default();
        let mut needed = usize::MAX;
        for (alternative, slots) in request.alternatives.iter().zip(candidates) {
            if let Some(count) = alternative.count.filter(|n| *n >= 2) {
                needed = needed.min(count);
                union.extend(slots.iter().filter(|slot| seen.insert(**slot)));
            }
        }
        let (inventory, usage) = (&self.inventory, &self.usage);
        let mut places = topology::PlaceReader::default();
        topology::groups(
            &union,
            |slot| places.place(&inventory.device(slot).raw),
            |slot| !usage.is_exclusive(slot) && usage.counters_fit(inventory, inventory.device(slot)),
            needed,
        )
    }
}

/// `candidates` with request `r`'s multi-device alternatives kept to `group`.
fn restrict(candidates: &[Vec<Vec<u32>>], requests: &[Request<'_>], r: usize, group: &[u32]) -> Vec<Vec<Vec<u32>>> {
    let mut restricted = candidates.to_vec();
    for (alternative, slots) in requests[r].alternatives.iter().zip(&mut restricted[r]) {
        if alternative.count.is_some_and(|n| n >= 2) {
            slots.retain(|slot| group.contains(slot));
        }
    }
    restricted
}
