//! The engine's public face. It follows the cluster object by object (slices, classes and
//! allocated claims added, replaced or removed, as a watch reports them) and costs in proportion
//! to the change: a slice re-checks its pool and the nodes that pool reaches, a claim takes or
//! gives back its devices. `Allocator::new` is the same engine fed every object once: the
//! differential test holds the two to the same state after every step of a random stream.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use dra_cel::SelectorCache;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};

use crate::audit::{InvariantViolation, audit};
use crate::device::AttrValue;
use crate::holdings::Holdings;
use crate::inventory::{IgnoredPool, IgnoredSlice, Inventory, PoolKey};
use crate::memo::Memo;
use crate::node_selection::NodeBinding;
use crate::reach::Reach;
use crate::request::claim_name;
use crate::selector_answers::SelectorAnswers;
use crate::taint_rules::TaintRule;
use crate::usage::Usage;

/// The allocation engine. See the crate docs.
pub struct Allocator {
    pub(crate) inventory: Inventory,
    pub(crate) classes: Arc<HashMap<String, DeviceClass>>,
    pub(crate) usage: Usage,
    pub(crate) holdings: Holdings,
    pub(crate) cel: SelectorCache,
    pub(crate) answers: SelectorAnswers,
    pub(crate) reach: Reach,
    pub(crate) memo: Memo,
    pub(crate) share_counter: u64,
    pub(crate) unsatisfiable_reason: Option<String>,
    /// The admin DeviceTaintRules honoured (`set_taint_rules`).
    pub(crate) taint_rules: Vec<TaintRule>,
    anonymous_commits: u64,
}

impl Default for Allocator {
    fn default() -> Self {
        Allocator {
            inventory: Inventory::default(),
            classes: Arc::new(HashMap::new()),
            usage: Usage::default(),
            holdings: Holdings::default(),
            cel: SelectorCache::new(),
            answers: SelectorAnswers::default(),
            reach: Reach::default(),
            memo: Memo::default(),
            share_counter: 0,
            unsatisfiable_reason: None,
            taint_rules: Vec::new(),
            anonymous_commits: 0,
        }
    }
}

/// How an engine names a claim: its uid, else `namespace/name`.
pub fn claim_id(claim: &ResourceClaim) -> String {
    claim.metadata.uid.clone().unwrap_or_else(|| claim_name(claim))
}

impl Allocator {
    /// An engine fed `slices`, `classes` and the allocations of `allocated` (malformed pools are
    /// skipped and reported by `ignored_slices`).
    pub fn new(slices: &[ResourceSlice], classes: &[DeviceClass], allocated: &[ResourceClaim]) -> Allocator {
        let mut allocator = Allocator::default();
        for class in classes {
            allocator.apply_class(class);
        }
        for claim in allocated {
            allocator.apply_claim(claim);
        }
        let slices: Vec<&ResourceSlice> = slices.iter().collect();
        allocator.apply_slices(&slices);
        allocator
    }

    /// Adds or replaces a slice (by name).
    pub fn apply_slice(&mut self, slice: &ResourceSlice) {
        self.apply_slices(&[slice]);
    }

    /// Adds or replaces several slices at once (a watch's initial list): each pool they touch
    /// is re-checked once.
    pub fn apply_slices(&mut self, slices: &[&ResourceSlice]) {
        let mut keys: BTreeSet<PoolKey> = BTreeSet::new();
        for slice in slices {
            let name = slice.metadata.name.as_deref().unwrap_or_default();
            if let Some(id) = self.inventory.pool_of_slice(name) {
                let pool = self.inventory.pool(id);
                keys.insert((pool.driver.clone(), pool.name.clone()));
            }
            keys.insert((
                Arc::from(slice.spec.driver.as_str()),
                Arc::from(slice.spec.pool.name.as_str()),
            ));
        }
        let keys: Vec<PoolKey> = keys.into_iter().collect();
        self.change_pools(&keys, |inventory| inventory.apply_slices(slices));
    }

    /// Removes the slice named `name`.
    pub fn remove_slice(&mut self, name: &str) {
        let Some(id) = self.inventory.pool_of_slice(name) else {
            return;
        };
        let pool = self.inventory.pool(id);
        let keys = [(pool.driver.clone(), pool.name.clone())];
        self.change_pools(&keys, |inventory| inventory.remove_slice(name));
    }

    /// Gives back what claims hold in the pools of `keys`, lets `change` alter the inventory,
    /// takes it again against the devices as they are now, and updates what depends on them.
    fn change_pools(&mut self, keys: &[PoolKey], change: impl FnOnce(&mut Inventory) -> Vec<u32>) {
        for key in keys {
            self.holdings
                .release_pool(key, &self.inventory, &mut self.usage, &mut self.reach);
        }
        let touched = change(&mut self.inventory);
        // Counter set slots may have been reused: drop what was kept for the old sets first.
        self.usage.forget_sets(&self.inventory);
        for key in keys {
            self.holdings
                .take_pool(key, &self.inventory, &mut self.usage, &mut self.reach);
        }
        let changed = std::mem::take(&mut self.inventory.changed_slots);
        self.answers.forget_slots(&changed);
        self.reach.update_pools(&self.inventory, &touched);
        self.inventory.collect(&touched);
        if !self.taint_rules.is_empty() {
            self.refresh_rule_hits();
        }
    }

    /// Adds or replaces a DeviceClass (by name).
    pub fn apply_class(&mut self, class: &DeviceClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        Arc::make_mut(&mut self.classes).insert(name, class.clone());
        self.class_changed();
    }

    pub fn remove_class(&mut self, name: &str) {
        Arc::make_mut(&mut self.classes).remove(name);
        self.class_changed();
    }

    /// A class changed: what was found with it goes, and so may the devices a 1.34 rule naming
    /// a class selects.
    fn class_changed(&mut self) {
        if !self.taint_rules.is_empty() {
            self.refresh_rule_hits();
        }
        self.memo.clear();
    }

    /// Records what `claim` holds now (its allocation, or nothing), replacing what it held.
    pub fn apply_claim(&mut self, claim: &ResourceClaim) {
        let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
        self.commit_claim(claim, allocation);
    }

    /// Records `allocation` as what `claim` holds (after it was written), or nothing.
    pub fn commit_claim(&mut self, claim: &ResourceClaim, allocation: Option<&AllocationResult>) {
        self.holdings.set(
            &claim_id(claim),
            &claim_name(claim),
            allocation,
            &mut self.inventory,
            &mut self.usage,
            &mut self.reach,
        );
    }

    /// Gives back what the claim with this id (see [`claim_id`]) holds.
    pub fn remove_claim(&mut self, id: &str) {
        self.holdings
            .remove(id, &self.inventory, &mut self.usage, &mut self.reach);
    }

    /// Records an allocation as in use under a name of its own (for callers without claims).
    /// Results with admin access take nothing; devices not in the inventory wait for their slice.
    pub fn commit(&mut self, allocation: &AllocationResult) {
        self.anonymous_commits += 1;
        let id = format!("commit-{}", self.anonymous_commits);
        self.holdings.set(
            &id,
            &id,
            Some(allocation),
            &mut self.inventory,
            &mut self.usage,
            &mut self.reach,
        );
    }

    /// Recounts usage from the claims after a panic interrupted a search (its picks may still be
    /// counted), and drops remembered search results.
    pub fn recover(&mut self) {
        self.usage = self.holdings.recount(&self.inventory, &mut self.reach);
        self.memo.clear();
        self.unsatisfiable_reason = None;
    }

    /// Checks the safety invariants over `claims` (all allocated claims of the cluster).
    pub fn audit(&self, claims: &[ResourceClaim]) -> Vec<InvariantViolation> {
        let held: Vec<(String, &AllocationResult)> = claims
            .iter()
            .filter_map(|c| Some((claim_name(c), c.status.as_ref()?.allocation.as_ref()?)))
            .collect();
        audit(&self.inventory, held.iter().map(|(n, a)| (n.as_str(), *a)))
    }

    /// Checks the safety invariants over the claims this engine was given (see
    /// [`Allocator::apply_claim`]), in claim name order.
    pub fn audit_held(&self) -> Vec<InvariantViolation> {
        crate::audit::audit_holdings(&self.inventory, &self.holdings)
    }

    /// Slices left out because their pool was malformed or invalid (the whole pool is skipped).
    pub fn ignored_slices(&self) -> Vec<IgnoredSlice> {
        self.inventory.ignored_slices()
    }

    /// Pools left out whole: malformed, or invalid (a device name repeated across its slices).
    pub fn ignored_pools(&self) -> Vec<IgnoredPool> {
        self.inventory.ignored_pools()
    }

    /// Why the last `allocate` that returned `Ok(None)` found nothing.
    pub fn unsatisfiable_reason(&self) -> Option<&str> {
        self.unsatisfiable_reason.as_deref()
    }

    /// What metrics label a device by: the first of the string attributes `names` it publishes,
    /// and the node it is bound to (`None` when bound by a selector or to every node). `None`
    /// when no usable pool publishes the device.
    pub fn device_labels(
        &self,
        driver: &str,
        pool: &str,
        device: &str,
        names: &[&str],
    ) -> Option<(Option<&str>, Option<&str>)> {
        let slot = self.inventory.device_index(driver, pool, device)?;
        let raw = &self.inventory.device(slot).raw;
        let value = names
            .iter()
            .find_map(|name| raw.attributes().get(name).and_then(AttrValue::as_str));
        let node = match &**raw.binding() {
            NodeBinding::Node(node) => Some(node.as_str()),
            _ => None,
        };
        Some((value, node))
    }

    /// How many devices of usable pools the engine knows.
    pub fn device_count(&self) -> usize {
        self.inventory.live_devices().count()
    }
}
