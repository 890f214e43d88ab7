//! The controller's claims, as the watch reports them, each kept as a `StoredClaim` (kube's
//! reflector store would keep a whole `ResourceClaim` per claim, and a key of four strings). It
//! follows a watch the way kube's store does: an event applies or removes one claim, and a list (at
//! start, or after the watch restarts) is gathered aside and replaces the whole store when it is
//! complete, so claims deleted meanwhile go and a round never sees half a list.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::runtime::watcher::Event;
use tokio::sync::{Notify, watch};

use crate::allocation_clock::AllocationClock;
use crate::stored_claims::StoredClaim;

/// Claims by `namespace/name`.
type Claims = HashMap<String, StoredClaim>;

/// The store's reading side: cheap to clone.
#[derive(Clone)]
pub struct ClaimStore {
    claims: Arc<RwLock<Claims>>,
    listed: watch::Receiver<bool>,
    /// Woken after every change applied.
    changed: Arc<Notify>,
}

/// The store's writing side, fed by the claim watch.
pub struct ClaimStoreWriter {
    claims: Arc<RwLock<Claims>>,
    listing: Option<Claims>,
    listed: watch::Sender<bool>,
    changed: Arc<Notify>,
    /// Told every change, as it is applied (the GPU-time metrics).
    clock: AllocationClock,
}

fn key(claim: &ResourceClaim) -> String {
    let meta = &claim.metadata;
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// An empty store and its writer.
pub fn claim_store() -> (ClaimStore, ClaimStoreWriter) {
    let claims = Arc::new(RwLock::new(Claims::new()));
    let (listed, receiver) = watch::channel(false);
    let changed = Arc::new(Notify::new());
    let store = ClaimStore {
        claims: claims.clone(),
        listed: receiver,
        changed: changed.clone(),
    };
    let writer = ClaimStoreWriter {
        claims,
        listing: None,
        listed,
        changed,
        clock: AllocationClock::default(),
    };
    (store, writer)
}

impl ClaimStoreWriter {
    /// Tells `clock` every change from now on.
    pub fn with_clock(mut self, clock: AllocationClock) -> Self {
        self.clock = clock;
        self
    }

    /// Applies one watch event.
    pub fn apply(&mut self, event: Event<ResourceClaim>) {
        match event {
            Event::Apply(claim) => {
                let key = key(&claim);
                let stored = StoredClaim::of(claim);
                let mut claims = self.claims.write().expect("claim store");
                let before = claims.get(&key);
                self.clock.changed(before, Some(&stored), Instant::now());
                claims.insert(key, stored);
            }
            Event::Delete(claim) => {
                let gone = self.claims.write().expect("claim store").remove(&key(&claim));
                self.clock.changed(gone.as_ref(), None, Instant::now());
            }
            Event::Init => self.listing = Some(Claims::new()),
            Event::InitApply(claim) => {
                let key = key(&claim);
                self.listing
                    .get_or_insert_with(Claims::new)
                    .insert(key, StoredClaim::of(claim));
            }
            Event::InitDone => {
                let mut listed = self.listing.take().unwrap_or_default();
                listed.shrink_to_fit();
                let mut claims = self.claims.write().expect("claim store");
                self.clock.listed(&claims, &listed, Instant::now());
                *claims = listed;
                drop(claims);
                self.listed.send_replace(true);
            }
        }
        self.changed.notify_waiters();
    }
}

impl ClaimStore {
    /// Every claim, in no particular order.
    pub fn state(&self) -> Vec<StoredClaim> {
        self.claims.read().expect("claim store").values().cloned().collect()
    }

    /// Waits until every claim of `keys` (`namespace/name`) is stored allocated, at most `within`;
    /// false when that time ran out first.
    pub async fn until_allocated(&self, keys: &[String], within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.all_allocated(keys) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }

    fn all_allocated(&self, keys: &[String]) -> bool {
        let claims = self.claims.read().expect("claim store");
        keys.iter()
            .all(|k| claims.get(k).is_some_and(|c| c.allocated().is_some()))
    }

    /// Waits until the first list is complete.
    pub async fn wait_until_ready(&self) -> anyhow::Result<()> {
        self.listed.clone().wait_for(|listed| *listed).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(name: &str, allocated: bool) -> ResourceClaim {
        let mut value = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
        if allocated {
            value["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "p", "device": "gpu0"}]}}});
        }
        serde_json::from_value(value).unwrap()
    }

    fn names(store: &ClaimStore) -> Vec<(String, bool)> {
        let mut names: Vec<_> = store
            .state()
            .iter()
            .map(|c| (c.name().to_owned(), c.allocated().is_some()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn events_apply_and_remove_one_claim_each() {
        let (store, mut writer) = claim_store();
        writer.apply(Event::Apply(claim("a", false)));
        writer.apply(Event::Apply(claim("b", false)));
        writer.apply(Event::Apply(claim("a", true)));
        assert_eq!(names(&store), [("a".into(), true), ("b".into(), false)]);
        writer.apply(Event::Delete(claim("b", false)));
        assert_eq!(names(&store), [("a".into(), true)]);
    }

    #[tokio::test]
    async fn a_list_replaces_the_store_once_complete_and_makes_it_ready() {
        let (store, mut writer) = claim_store();
        writer.apply(Event::Apply(claim("gone", false)));
        writer.apply(Event::Init);
        writer.apply(Event::InitApply(claim("a", false)));
        assert_eq!(names(&store), [("gone".into(), false)], "half a list is not shown");
        assert!(!*store.listed.borrow());
        writer.apply(Event::InitApply(claim("b", true)));
        writer.apply(Event::InitDone);
        store.wait_until_ready().await.unwrap();
        assert_eq!(names(&store), [("a".into(), false), ("b".into(), true)]);
    }
}
