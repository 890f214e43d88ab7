//! Allocating one claim: on a given node, as the scheduler does for a Pod, or without one (a
//! standalone claim): then every node with devices and every node selector is tried, the
//! best-fitting solution wins (ties: nodes by name first), and the result's node selector says
//! where Pods using the claim may run. Searches on nodes are remembered per claim shape (see
//! `memo`). Nothing here changes what is in use: the caller commits what it writes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceConstraint, ResourceClaim};

use crate::allocator::Allocator;
use crate::best_fit::FitScore;
use crate::memo::{Outcome, ShapeMemo};
use crate::request::{Request, claim_name, requests_of};
use crate::scope::Scope;
use crate::search::{BudgetExceeded, Pick};
use crate::{AllocationError, result};

/// Steps of the search before a claim is declared unsatisfiable.
pub(crate) const SEARCH_BUDGET: u64 = 200_000;

fn constraints_of(claim: &ResourceClaim) -> &[DeviceConstraint] {
    claim
        .spec
        .devices
        .as_ref()
        .and_then(|d| d.constraints.as_deref())
        .unwrap_or_default()
}

impl Allocator {
    /// Finds the best-fit allocation for `claim` on `node`, or across the cluster without one
    /// (see the module docs). `Ok(None)`: nothing fits now (see `unsatisfiable_reason`). Does not
    /// change the allocator: call `commit` once the result is stored.
    pub fn allocate(
        &mut self,
        claim: &ResourceClaim,
        node: Option<&Node>,
    ) -> Result<Option<AllocationResult>, AllocationError> {
        self.allocate_in(claim, node, None)
    }

    /// Best fit for `claim` on the nodes `allowed` admits (for a Pod: those it may run on), as
    /// without a node but never on another node nor by a node selector, which could send the
    /// Pod where it cannot run.
    pub fn allocate_among(
        &mut self,
        claim: &ResourceClaim,
        allowed: &dyn Fn(&str) -> bool,
    ) -> Result<Option<AllocationResult>, AllocationError> {
        self.allocate_in(claim, None, Some(allowed))
    }

    fn allocate_in(
        &mut self,
        claim: &ResourceClaim,
        node: Option<&Node>,
        allowed: Option<&dyn Fn(&str) -> bool>,
    ) -> Result<Option<AllocationResult>, AllocationError> {
        self.unsatisfiable_reason = None;
        let name = claim_name(claim);
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            return Err(AllocationError::AlreadyAllocated { claim: name });
        }
        let classes = Arc::clone(&self.classes);
        let requests = requests_of(claim, &classes)?;
        let constraints = constraints_of(claim);
        let (outcome, node_name) = match node {
            Some(node) => {
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                let scope = Scope::Node {
                    name: node_name,
                    node: Some(node),
                };
                (
                    self.search_on(&name, &requests, constraints, scope)?,
                    node_name.to_owned(),
                )
            }
            None => self.search_everywhere(claim, &name, &requests, constraints, allowed)?,
        };
        match outcome {
            Outcome::Found(picks, _) => Ok(Some(result::build(
                &self.inventory,
                claim,
                &requests,
                &picks,
                &node_name,
                &mut self.share_counter,
            ))),
            Outcome::NotFound(reason) => {
                self.unsatisfiable_reason = Some(format!("claim {name}: {reason}"));
                Ok(None)
            }
        }
    }

    /// The best outcome over every node (see `memo`) and node selector, or over the nodes
    /// `allowed` admits; the node it was found on (empty for a selector).
    fn search_everywhere(
        &mut self,
        claim: &ResourceClaim,
        name: &str,
        requests: &[Request<'_>],
        constraints: &[DeviceConstraint],
        allowed: Option<&dyn Fn(&str) -> bool>,
    ) -> Result<(Outcome, String), AllocationError> {
        let (key, mut shape) = self.memo.take(claim);
        let result = self.rank_nodes(&mut shape, name, requests, constraints);
        let every_node = Arc::clone(&self.reach.ordered);
        let admitted: Vec<(Arc<str>, u32)>;
        let ordered: &[(Arc<str>, u32)] = match allowed {
            Some(allowed) => {
                admitted = every_node.iter().filter(|(node, _)| allowed(node)).cloned().collect();
                &admitted
            }
            None => &every_node,
        };
        let mut best: Option<(FitScore, Vec<Pick>, String)> = None;
        let mut reason: Option<Arc<str>> = None;
        if result.is_ok() {
            if let Some((score, node, Outcome::Found(picks, _))) = shape.best_where(allowed) {
                best = Some((*score, picks.clone(), node.to_string()));
            }
            reason = shape.first_reason(ordered);
        }
        self.memo.put_back(key, shape);
        result?;
        let mut others: Vec<Scope<'_>> = match allowed {
            Some(_) => vec![],
            None => (0..self.reach.selectors.len()).map(Scope::Selector).collect(),
        };
        if allowed.is_none() && ordered.is_empty() && others.is_empty() {
            others.push(Scope::Everywhere);
        }
        for scope in others {
            match self.search_on(name, requests, constraints, scope)? {
                Outcome::Found(picks, score) => {
                    if best.as_ref().is_none_or(|(s, _, _)| score < *s) {
                        best = Some((score, picks, String::new()));
                    }
                }
                Outcome::NotFound(why) => {
                    reason.get_or_insert(why);
                }
            }
        }
        Ok(match best {
            Some((score, picks, node)) => (Outcome::Found(picks, score), node),
            None => (
                Outcome::NotFound(reason.unwrap_or_else(|| Arc::from("no device fits"))),
                String::new(),
            ),
        })
    }

    /// Brings a shape's memo up to date: searches again the nodes that changed since it was
    /// last used, or every node when it is new or too old.
    fn rank_nodes(
        &mut self,
        shape: &mut ShapeMemo,
        name: &str,
        requests: &[Request<'_>],
        constraints: &[DeviceConstraint],
    ) -> Result<(), AllocationError> {
        let global = self.reach.global_version;
        let stale: Vec<u32> = match shape.seen {
            Some((position, seen_global)) if seen_global == global => match self.reach.changed_since(position) {
                Some(changed) => {
                    let mut changed = changed.to_vec();
                    changed.sort_unstable();
                    changed.dedup();
                    changed
                }
                None => {
                    shape.clear();
                    self.reach.ordered.iter().map(|(_, id)| *id).collect()
                }
            },
            _ => {
                shape.clear();
                self.reach.ordered.iter().map(|(_, id)| *id).collect()
            }
        };
        // Invalid until every stale node is searched (an error leaves it so).
        shape.seen = None;
        for id in stale {
            let Some(reach) = self.reach.nodes.get(id as usize).and_then(Option::as_ref) else {
                shape.forget(id);
                continue;
            };
            let (node, version) = (reach.name.clone(), reach.version);
            if shape.get(id, version).is_some() {
                continue;
            }
            let scope = Scope::Node {
                name: &node,
                node: None,
            };
            let outcome = self.search_on(name, requests, constraints, scope)?;
            shape.put(id, &node, version, outcome);
        }
        shape.seen = Some((self.reach.log_end(), global));
        Ok(())
    }

    /// One search in one scope.
    pub(crate) fn search_on(
        &mut self,
        name: &str,
        requests: &[Request<'_>],
        constraints: &[DeviceConstraint],
        scope: Scope<'_>,
    ) -> Result<Outcome, AllocationError> {
        let mut candidates = Vec::with_capacity(requests.len());
        for request in requests {
            let mut per_alternative = Vec::with_capacity(request.alternatives.len());
            for alternative in &request.alternatives {
                let list = self.candidates_for(name, alternative, scope)?;
                if alternative.count.is_none() && self.scope_has_incomplete_pool(scope) {
                    per_alternative.push(Vec::new());
                    continue;
                }
                per_alternative.push(list);
            }
            candidates.push(per_alternative);
        }
        // On a node, a request of several devices tries its closest groups first (see `topology`).
        let outcome = match self.search_grouped(requests, &candidates, constraints, scope) {
            Some(found) => found,
            None => match self.search_once(requests, &candidates, constraints, SEARCH_BUDGET) {
                Ok(Some(found)) => found,
                Ok(None) => Outcome::NotFound(Arc::from(explain(requests, &candidates))),
                Err(BudgetExceeded) => {
                    Outcome::NotFound(Arc::from(format!("gave up after {SEARCH_BUDGET} search steps")))
                }
            },
        };
        Ok(self.mark_opening(outcome, requests, scope))
    }

    /// Whether a scope reaches devices of an incomplete pool: `All` cannot be served there.
    fn scope_has_incomplete_pool(&self, scope: Scope<'_>) -> bool {
        self.reach
            .scope_devices(&self.inventory, scope)
            .iter()
            .any(|slot| self.inventory.pool(self.inventory.device(*slot).pool).incomplete)
    }
}

/// Why a search found nothing (without the claim's name).
fn explain(requests: &[Request<'_>], candidates: &[Vec<Vec<u32>>]) -> String {
    for (request, per_alternative) in requests.iter().zip(candidates) {
        if per_alternative.iter().all(Vec::is_empty) {
            let classes: Vec<_> = request
                .alternatives
                .iter()
                .map(|a| a.class.metadata.name.as_deref().unwrap_or_default())
                .collect();
            return format!(
                "request {}: no device matches class {} and the selectors",
                request.name,
                classes.join(" or ")
            );
        }
    }
    "matching devices exist, but not enough are free together (in use, counters, capacity or constraints)".to_owned()
}
