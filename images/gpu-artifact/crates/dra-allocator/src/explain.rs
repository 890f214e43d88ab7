//! Why a claim cannot be allocated, node by node, found by the same searches that allocate: for
//! each request, the devices matching its class and selectors on the node; none (the node offers
//! no device of the class), fewer than the count asks (a count no node can give), or enough that
//! are all taken, naming the claims holding them or their cards' counters, or all tainted, naming
//! the taints (an admin's DeviceTaintRule by its name). The nodes nearest to
//! serving the claim come first: most requests served alone, then most free matching devices.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceToleration, ResourceClaim};

use crate::allocator::Allocator;
use crate::memo::Outcome;
use crate::request::{claim_name, requests_of};
use crate::scope::Scope;
use crate::{ALLOCATION_RESULTS_MAX_SIZE, AllocationError};

/// Why one request cannot be served on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestProblem {
    /// No device of the node matches the class and selectors.
    NoDevice { request: String, class: String },
    /// The request asks for more matching devices than the node has.
    CountTooLarge {
        request: String,
        count: usize,
        matching: usize,
    },
    /// Matching devices exist but are taken, or their cards' counters are (by these claims).
    Taken { request: String, holders: Vec<String> },
    /// Every matching device carries a taint the request does not tolerate: these admin
    /// DeviceTaintRules (`DeviceTaintRule <name>`) or slice taints (`taint <key>=<value>:<effect>`).
    Tainted { request: String, taints: Vec<String> },
}

impl std::fmt::Display for RequestProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestProblem::NoDevice { request, class } => {
                write!(f, "request {request}: no device of class {class}")
            }
            RequestProblem::CountTooLarge {
                request,
                count,
                matching,
            } => {
                write!(
                    f,
                    "request {request}: asks for {count} devices, the node has {matching} that match"
                )
            }
            RequestProblem::Taken { request, holders } if holders.is_empty() => {
                write!(f, "request {request}: matching devices are in use")
            }
            RequestProblem::Taken { request, holders } => {
                write!(
                    f,
                    "request {request}: devices or their cards' counters taken by {}",
                    holders.join(", ")
                )
            }
            RequestProblem::Tainted { request, taints } => {
                write!(
                    f,
                    "request {request}: matching devices are tainted, not tolerated: {}",
                    taints.join(", ")
                )
            }
        }
    }
}

/// One node's answer for a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeExplanation {
    pub node: String,
    /// Empty when each request fits alone but not all together.
    pub problems: Vec<RequestProblem>,
    /// Requests the node could serve on their own, and matching devices free on it.
    pub served_alone: usize,
    pub free_matching: usize,
}

/// Why a claim fits nowhere, nearest nodes first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Explanation {
    pub nodes: Vec<NodeExplanation>,
    /// The largest count asked that no node has enough matching devices for.
    pub count_beyond_every_node: Option<(String, usize, usize)>,
}

/// What a node offers a request, before any search.
struct Look {
    request: usize,
    candidates: Vec<u32>,
}

impl Allocator {
    /// Explains, for up to `nearest` nodes, why `claim` cannot be allocated (or `Ok(None)` if it
    /// can be now). Selector and class errors come back as errors, as from `allocate`.
    pub fn explain(&mut self, claim: &ResourceClaim, nearest: usize) -> Result<Option<Explanation>, AllocationError> {
        let name = claim_name(claim);
        let classes = Arc::clone(&self.classes);
        let requests = requests_of(claim, &classes)?;
        let mut probe = claim.clone();
        if let Some(status) = probe.status.as_mut() {
            status.allocation = None;
        }
        if self.allocate(&probe, None)?.is_some() {
            return Ok(None);
        }
        // First every node, cheaply: what matches and how much of it is free.
        let nodes: Vec<Arc<str>> = self.reach.node_ids.keys().cloned().collect();
        let mut looks: Vec<(Arc<str>, Vec<Look>, usize, usize)> = Vec::with_capacity(nodes.len());
        let mut most_matching: HashMap<&str, usize> = HashMap::new();
        for node in &nodes {
            let scope = Scope::Node { name: node, node: None };
            let mut per_request = Vec::with_capacity(requests.len());
            let (mut enough, mut free_total) = (0, 0);
            for (r, request) in requests.iter().enumerate() {
                let alternative = &request.alternatives[0];
                let candidates = self.candidates_for(&name, alternative, scope)?;
                let seen = most_matching.entry(request.name).or_default();
                *seen = (*seen).max(candidates.len());
                let free = candidates
                    .iter()
                    .filter(|s| {
                        let device = self.inventory.device(**s);
                        (device.raw.kind.shared || !self.usage.is_exclusive(**s))
                            && self.usage.counters_fit(&self.inventory, device)
                    })
                    .count();
                if free >= alternative.count.unwrap_or(1) {
                    enough += 1;
                }
                free_total += free;
                per_request.push(Look { request: r, candidates });
            }
            looks.push((node.clone(), per_request, enough, free_total));
        }
        looks.sort_by(|a, b| (b.2, b.3).cmp(&(a.2, a.3)).then_with(|| a.0.cmp(&b.0)));
        looks.truncate(nearest);
        // Then the nearest nodes, closely: a search per request, and who holds what matches.
        let holders = self.holders();
        let mut explained = Vec::new();
        for (node, per_request, _, free_matching) in looks {
            let scope = Scope::Node {
                name: &node,
                node: None,
            };
            let mut problems = Vec::new();
            let mut served_alone = 0;
            for look in per_request {
                let request = &requests[look.request];
                let alternative = &request.alternatives[0];
                let count = alternative.count.unwrap_or(look.candidates.len().max(1));
                if look.candidates.is_empty() {
                    let class = alternative.class.metadata.name.clone().unwrap_or_default();
                    problems.push(RequestProblem::NoDevice {
                        request: request.name.to_owned(),
                        class,
                    });
                } else if count > look.candidates.len() {
                    problems.push(RequestProblem::CountTooLarge {
                        request: request.name.to_owned(),
                        count,
                        matching: look.candidates.len(),
                    });
                } else if let Outcome::Found(..) = self.search_on(&name, std::slice::from_ref(request), &[], scope)? {
                    served_alone += 1;
                } else if let Some(taints) = self.all_untolerated(&look.candidates, alternative.tolerations) {
                    problems.push(RequestProblem::Tainted {
                        request: request.name.to_owned(),
                        taints,
                    });
                } else {
                    let mut names = BTreeSet::new();
                    for slot in &look.candidates {
                        names.extend(holders.of(&self.inventory, *slot));
                    }
                    problems.push(RequestProblem::Taken {
                        request: request.name.to_owned(),
                        holders: names.into_iter().collect(),
                    });
                }
            }
            explained.push(NodeExplanation {
                node: node.to_string(),
                problems,
                served_alone,
                free_matching,
            });
        }
        let count_beyond_every_node = requests.iter().find_map(|request| {
            let count = request.alternatives[0].count?;
            let most = most_matching.get(request.name).copied().unwrap_or(0);
            (count > most && count <= ALLOCATION_RESULTS_MAX_SIZE).then(|| (request.name.to_owned(), count, most))
        });
        Ok(Some(Explanation {
            nodes: explained,
            count_beyond_every_node,
        }))
    }

    /// The taints keeping a request with `tolerations` off every one of `candidates`, or `None`
    /// when one of them is tolerated.
    fn all_untolerated(&self, candidates: &[u32], tolerations: &[DeviceToleration]) -> Option<Vec<String>> {
        let mut taints = BTreeSet::new();
        for slot in candidates {
            let untolerated = self.inventory.untolerated(*slot, tolerations);
            if untolerated.is_empty() {
                return None;
            }
            taints.extend(untolerated);
        }
        Some(taints.into_iter().collect())
    }

    fn holders(&self) -> Holders {
        let mut holders = Holders::default();
        for held in self.holdings.claims.values() {
            for holding in &held.holdings {
                let Some((slot, _)) = holding.taken else { continue };
                holders.by_device.entry(slot).or_default().insert(held.name.clone());
                for (set, _) in self.inventory.device(slot).consumes.iter() {
                    holders.by_set.entry(set).or_default().insert(held.name.clone());
                }
            }
        }
        holders
    }
}

/// Claims holding each device, and each counter set through any of its devices.
#[derive(Default)]
struct Holders {
    by_device: HashMap<u32, BTreeSet<String>>,
    by_set: HashMap<u32, BTreeSet<String>>,
}

impl Holders {
    fn of<'h>(&'h self, inventory: &'h crate::inventory::Inventory, slot: u32) -> impl Iterator<Item = String> + 'h {
        let direct = self.by_device.get(&slot).into_iter().flatten();
        let through_counters = inventory
            .device(slot)
            .consumes
            .iter()
            .flat_map(move |(set, _)| self.by_set.get(&set).into_iter().flatten());
        direct.chain(through_counters).cloned()
    }
}
