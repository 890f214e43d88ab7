//! Keeps one allocation engine up to date from watch events, so a round never rebuilds it: a slice,
//! class or claim event applies or removes that one object. A list (at start, or after a watch
//! restart) is applied object by object as it arrives, so no copy of the whole list is held, and
//! when it is complete whatever it no longer lists is removed.
//!
//! Our own writes reach the engine before the watch brings them back (so the next claim never
//! gets the same devices). Until the watch shows the claim at the resourceVersion we wrote, older
//! events of that claim are stale and skipped, as the kube-scheduler's assume cache does (it also
//! compares resourceVersions as numbers). The watch may also bring a write back before the writer
//! hears of it: then there is nothing to wait for, and the engine keeps what the watch gave it.

use std::collections::{BTreeMap, HashMap, HashSet};

use dra_allocator::{Allocator, TaintRule, claim_id};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::runtime::watcher::Event;

/// The engine and what is needed to follow the watches into it.
#[derive(Default)]
pub struct EngineFeed {
    pub engine: Allocator,
    slices: Relist,
    classes: Relist,
    claims: Relist,
    taint_rules: Relist,
    /// The admin DeviceTaintRules, by name (the engine takes them all at once).
    rules: BTreeMap<String, TaintRule>,
    /// Claims we wrote, by id, with the resourceVersion the API server gave our write.
    written: HashMap<String, u64>,
    /// Per claim id, the highest resourceVersion the watch has brought.
    watched: HashMap<String, u64>,
}

/// The names known of one kind, and the names of a list in progress.
#[derive(Default)]
struct Relist {
    known: HashSet<String>,
    listing: Option<HashSet<String>>,
}

/// What one watch event asks of a kind: objects to apply, names to remove.
struct Changes<K> {
    apply: Vec<K>,
    remove: Vec<String>,
}

impl Relist {
    fn follow<K>(&mut self, event: Event<K>, name: impl Fn(&K) -> String) -> Changes<K> {
        let mut changes = Changes {
            apply: vec![],
            remove: vec![],
        };
        match event {
            Event::Apply(object) => {
                self.known.insert(name(&object));
                changes.apply.push(object);
            }
            Event::Delete(object) => {
                let name = name(&object);
                self.known.remove(&name);
                changes.remove.push(name);
            }
            Event::Init => self.listing = Some(HashSet::new()),
            Event::InitApply(object) => {
                self.listing.get_or_insert_with(HashSet::new).insert(name(&object));
                changes.apply.push(object);
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                changes.remove = self.known.difference(&listed).cloned().collect();
                changes.remove.sort();
                self.known = listed;
            }
        }
        changes
    }
}

fn slice_name(slice: &ResourceSlice) -> String {
    slice.metadata.name.clone().unwrap_or_default()
}

fn class_name(class: &DeviceClass) -> String {
    class.metadata.name.clone().unwrap_or_default()
}

fn resource_version(claim: &ResourceClaim) -> Option<u64> {
    claim.metadata.resource_version.as_deref()?.parse().ok()
}

impl EngineFeed {
    pub fn slice_event(&mut self, event: Event<ResourceSlice>) {
        let changes = self.slices.follow(event, slice_name);
        for name in &changes.remove {
            self.engine.remove_slice(name);
        }
        let slices: Vec<&ResourceSlice> = changes.apply.iter().collect();
        if !slices.is_empty() {
            self.engine.apply_slices(&slices);
        }
    }

    pub fn class_event(&mut self, event: Event<DeviceClass>) {
        let changes = self.classes.follow(event, class_name);
        for name in &changes.remove {
            self.engine.remove_class(name);
        }
        for class in &changes.apply {
            self.engine.apply_class(class);
        }
    }

    /// A DeviceTaintRule event: the engine gets the whole set again, once a first list is
    /// complete (not page by page).
    pub fn taint_rule_event(&mut self, event: Event<TaintRule>) {
        let changes = self.taint_rules.follow(event, |rule| rule.name.clone());
        if changes.apply.is_empty() && changes.remove.is_empty() && self.taint_rules.listing.is_some() {
            return;
        }
        for name in &changes.remove {
            self.rules.remove(name);
        }
        for rule in changes.apply {
            self.rules.insert(rule.name.clone(), rule);
        }
        if self.taint_rules.listing.is_none() {
            self.engine.set_taint_rules(self.rules.values().cloned().collect());
        }
    }

    pub fn claim_event(&mut self, event: Event<ResourceClaim>) {
        let changes = self.claims.follow(event, claim_id);
        for id in &changes.remove {
            self.written.remove(id);
            self.watched.remove(id);
            self.engine.remove_claim(id);
        }
        for claim in &changes.apply {
            if let Some(version) = resource_version(claim) {
                let seen = self.watched.entry(claim_id(claim)).or_default();
                *seen = (*seen).max(version);
            }
            if !self.is_stale(claim) {
                self.engine.apply_claim(claim);
            }
        }
    }

    /// Records a claim as the API server returned our write of it.
    pub fn wrote(&mut self, claim: &ResourceClaim) {
        let id = claim_id(claim);
        let seen = self.watched.get(&id).copied();
        if let (Some(ours), Some(seen)) = (resource_version(claim), seen)
            && seen >= ours
        {
            // The watch brought this write (or a later change) back first: the engine has it, and
            // waiting for it would hold the claim until its next change.
            return;
        }
        match resource_version(claim) {
            Some(version) => self.written.insert(id.clone(), version),
            None => self.written.remove(&id),
        };
        self.claims.known.insert(id);
        self.engine.apply_claim(claim);
    }

    /// True while our write of the claim with this id has not come back through the watch: the
    /// round's copy of it is older than the engine's.
    pub fn awaiting_watch(&self, id: &str) -> bool {
        self.written.contains_key(id)
    }

    /// An event older than our write of the same claim is skipped; the first one at or past it
    /// ends the wait.
    fn is_stale(&mut self, claim: &ResourceClaim) -> bool {
        let id = claim_id(claim);
        let Some(&ours) = self.written.get(&id) else {
            return false;
        };
        if resource_version(claim).is_some_and(|version| version < ours) {
            return true;
        }
        self.written.remove(&id);
        false
    }
}

#[cfg(test)]
#[path = "engine_feed_tests.rs"]
mod tests;
