//! The engine's public face: built from slices, classes and allocated claims; allocates one
//! claim at a time without changing its state, and `commit` records an allocation once it is
//! written. Compiled selectors, device contexts and selector results are cached for the
//! allocator's lifetime, and candidate lists per (class, selectors, scope) too.

use std::collections::HashMap;
use std::sync::Arc;

use dra_cel::{CelError, DeviceContext, SelectorCache};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};

use crate::audit::{InvariantViolation, audit};
use crate::constraint::Constraint;
use crate::inventory::{IgnoredPool, IgnoredSlice, Inventory};
use crate::request::{claim_name, requests_of};
use crate::scope::{Reach, Scope, scopes_without_node};
use crate::search::Search;
use crate::usage::{Take, Usage};
use crate::{AllocationError, result};

/// Steps of the search before a claim is declared unsatisfiable.
const SEARCH_BUDGET: u64 = 200_000;

/// Best-fit score of a solution: total memory slices, then total memory (lower is better).
type FitScore = (u64, dra_cel::Quantity);

/// The allocation engine. See the crate docs.
pub struct Allocator {
    pub(crate) inventory: Inventory,
    pub(crate) classes: Arc<HashMap<String, DeviceClass>>,
    usage: Usage,
    pub(crate) cel: SelectorCache,
    pub(crate) contexts: Vec<Option<Result<DeviceContext, CelError>>>,
    pub(crate) expression_ids: HashMap<String, usize>,
    /// Per expression id, per device: 0 not evaluated, 1 no match, 2 match.
    pub(crate) selector_results: Vec<Vec<u8>>,
    pub(crate) candidates: HashMap<String, Arc<Vec<usize>>>,
    pub(crate) reach: Reach,
    share_counter: u64,
    unsatisfiable_reason: Option<String>,
}

impl Allocator {
    /// Indexes `slices` (malformed pools are skipped and reported by `ignored_slices`), and
    /// counts every allocation of `allocated` as in use.
    pub fn new(slices: &[ResourceSlice], classes: &[DeviceClass], allocated: &[ResourceClaim]) -> Allocator {
        let inventory = Inventory::build(slices);
        let mut allocator = Allocator {
            reach: Reach::of(&inventory),
            contexts: (0..inventory.devices.len()).map(|_| None).collect(),
            inventory,
            classes: Arc::new(
                classes
                    .iter()
                    .map(|c| (c.metadata.name.clone().unwrap_or_default(), c.clone()))
                    .collect(),
            ),
            usage: Usage::default(),
            cel: SelectorCache::new(),
            expression_ids: HashMap::new(),
            selector_results: Vec::new(),
            candidates: HashMap::new(),
            share_counter: 0,
            unsatisfiable_reason: None,
        };
        for claim in allocated {
            if let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                allocator.commit(allocation);
            }
        }
        allocator
    }

    /// Slices left out because their pool was malformed or invalid (the whole pool is skipped).
    pub fn ignored_slices(&self) -> &[IgnoredSlice] {
        &self.inventory.ignored
    }

    /// Pools left out whole: malformed, or invalid (a device name repeated across its slices).
    pub fn ignored_pools(&self) -> &[IgnoredPool] {
        &self.inventory.ignored_pools
    }

    /// Why the last `allocate` that returned `Ok(None)` found nothing.
    pub fn unsatisfiable_reason(&self) -> Option<&str> {
        self.unsatisfiable_reason.as_deref()
    }

    /// Records an allocation as in use (after it was written, or one seen from someone else).
    /// Results with admin access take nothing; devices not in the inventory are ignored.
    pub fn commit(&mut self, allocation: &AllocationResult) {
        for r in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            if r.admin_access == Some(true) {
                continue;
            }
            let Some(index) = self.inventory.device_index(&r.driver, &r.pool, &r.device) else {
                continue;
            };
            let (take, consumed) = match &r.share_id {
                Some(_) => {
                    let device = &self.inventory.devices[index];
                    let consumed: Vec<_> = device
                        .capacity
                        .iter()
                        .map(|(name, _, _)| {
                            r.consumed_capacity
                                .as_ref()
                                .and_then(|c| c.get(name))
                                .and_then(|q| dra_cel::Quantity::parse(&q.0).ok())
                                .unwrap_or_default()
                        })
                        .collect();
                    (Take::Share, Some(consumed))
                }
                None => (Take::Exclusive, None),
            };
            self.usage.take(&self.inventory, index, take, consumed.as_deref());
        }
    }

    /// Checks the safety invariants over `claims` (all allocated claims of the cluster).
    pub fn audit(&self, claims: &[ResourceClaim]) -> Vec<InvariantViolation> {
        audit(&self.inventory, claims)
    }

    /// Finds the best-fit allocation for `claim` on `node`. Without a node (a standalone claim),
    /// every node and every node selector of the inventory is tried separately, as the scheduler
    /// tries node after node, and the best-fitting solution wins (ties: nodes by name first); the
    /// result's node selector says where Pods using the claim may run. `Ok(None)`: nothing fits
    /// now (see `unsatisfiable_reason`). Does not change the allocator: call `commit` once the
    /// result is stored.
    pub fn allocate(
        &mut self,
        claim: &ResourceClaim,
        node: Option<&Node>,
    ) -> Result<Option<AllocationResult>, AllocationError> {
        self.unsatisfiable_reason = None;
        let name = claim_name(claim);
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            return Err(AllocationError::AlreadyAllocated { claim: name });
        }
        let classes = Arc::clone(&self.classes);
        let requests = requests_of(claim, &classes)?;
        if let Some(node) = node {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let scope = Scope::Node {
                name: node_name,
                node: Some(node),
            };
            return Ok(self
                .allocate_on(claim, &name, &requests, scope)?
                .map(|(result, _)| result));
        }
        let nodes = self.reach.node_names();
        let scopes = scopes_without_node(&nodes, self.reach.selectors.len());
        self.allocate_in_any(claim, &name, &requests, &scopes)
    }

    /// The best solution over `scopes`, the first on ties.
    fn allocate_in_any(
        &mut self,
        claim: &ResourceClaim,
        name: &str,
        requests: &[crate::request::Request<'_>],
        scopes: &[Scope<'_>],
    ) -> Result<Option<AllocationResult>, AllocationError> {
        let mut best: Option<(AllocationResult, FitScore)> = None;
        let mut reason = None;
        for scope in scopes {
            match self.allocate_on(claim, name, requests, *scope)? {
                Some((result, score)) if best.as_ref().is_none_or(|(_, s)| score < *s) => best = Some((result, score)),
                Some(_) => {}
                None => reason = reason.or_else(|| self.unsatisfiable_reason.take()),
            }
        }
        self.unsatisfiable_reason = if best.is_none() { reason } else { None };
        Ok(best.map(|(result, _)| result))
    }

    fn allocate_on(
        &mut self,
        claim: &ResourceClaim,
        name: &str,
        requests: &[crate::request::Request<'_>],
        scope: Scope<'_>,
    ) -> Result<Option<(AllocationResult, FitScore)>, AllocationError> {
        let mut candidates = Vec::with_capacity(requests.len());
        for request in requests {
            let mut per_alternative = Vec::with_capacity(request.alternatives.len());
            for alternative in &request.alternatives {
                let list = self.candidates_for(name, alternative, scope)?;
                if alternative.count.is_none() && self.scope_has_incomplete_pool(scope) {
                    per_alternative.push(Vec::new());
                    continue;
                }
                per_alternative.push(list.as_ref().clone());
            }
            candidates.push(per_alternative);
        }
        let constraints = Constraint::from_claim(
            claim
                .spec
                .devices
                .as_ref()
                .and_then(|d| d.constraints.as_deref())
                .unwrap_or_default(),
        );
        let mut search = Search::new(
            &self.inventory,
            &mut self.usage,
            requests,
            &candidates,
            constraints,
            SEARCH_BUDGET,
        );
        let outcome = search.run();
        let result = match outcome {
            Ok(true) => {
                let score = search
                    .picks
                    .iter()
                    .fold((0u64, dra_cel::Quantity::ZERO), |(slices, memory), p| {
                        let fit = &self.inventory.devices[p.device].fit;
                        (slices + u64::from(fit.memory_slices), memory.saturating_add(fit.memory))
                    });
                let result = result::build(
                    &self.inventory,
                    claim,
                    requests,
                    &search.picks,
                    scope.node_name().unwrap_or_default(),
                    &mut self.share_counter,
                );
                Some((result, score))
            }
            Ok(false) => None,
            Err(_) => {
                search.release_all();
                self.unsatisfiable_reason = Some(format!("claim {name}: gave up after {SEARCH_BUDGET} search steps"));
                return Ok(None);
            }
        };
        search.release_all();
        if result.is_none() {
            self.unsatisfiable_reason = Some(self.explain(name, requests, &candidates));
        }
        Ok(result)
    }

    fn explain(&self, claim: &str, requests: &[crate::request::Request<'_>], candidates: &[Vec<Vec<usize>>]) -> String {
        for (request, per_alternative) in requests.iter().zip(candidates) {
            if per_alternative.iter().all(Vec::is_empty) {
                let classes: Vec<_> = request
                    .alternatives
                    .iter()
                    .map(|a| a.class.metadata.name.as_deref().unwrap_or_default())
                    .collect();
                return format!(
                    "claim {claim}: request {}: no device matches class {} and the selectors",
                    request.name,
                    classes.join(" or ")
                );
            }
        }
        format!(
            "claim {claim}: matching devices exist, but not enough are free together (in use, counters, capacity or constraints)"
        )
    }

    fn scope_has_incomplete_pool(&self, scope: Scope<'_>) -> bool {
        self.reach
            .devices(scope)
            .iter()
            .any(|d| self.inventory.pools[self.inventory.devices[*d].pool].incomplete)
    }
}
