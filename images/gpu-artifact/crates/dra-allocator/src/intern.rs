//! One shared copy of what many devices carry alike: names repeated on every node
//! (`gpu3-mig-1g10gb-2`), the attributes of one card, a MIG offer's counter consumption, a
//! model's counter set. A cluster of a thousand 8-GPU nodes publishes about 200,000 devices; kept
//! as separate copies their descriptions would not fit the controller's memory.
//!
//! Entries nobody else holds any more are dropped by `prune` (called when a pool goes), so the
//! tables follow the inventory and do not grow with the churn of node names or card UUIDs.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// Shared copies of values of one type.
pub(crate) struct Dedup<T: ?Sized + Eq + Hash> {
    values: HashSet<Arc<T>>,
}

impl<T: ?Sized + Eq + Hash> Default for Dedup<T> {
    fn default() -> Self {
        Dedup { values: HashSet::new() }
    }
}

impl<T: ?Sized + Eq + Hash> Dedup<T> {
    /// The shared copy of `value`, made from it with `make` if there is none yet.
    pub(crate) fn get<Q>(&mut self, value: &Q, make: impl FnOnce(&Q) -> Arc<T>) -> Arc<T>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Eq + Hash,
    {
        if let Some(found) = self.values.get(value) {
            return Arc::clone(found);
        }
        let made = make(value);
        self.values.insert(Arc::clone(&made));
        made
    }

    /// The shared copy of `value`, if there is one; adds nothing.
    pub(crate) fn find<Q>(&self, value: &Q) -> Option<&Arc<T>>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Eq + Hash,
    {
        self.values.get(value)
    }

    /// Drops the copies only this table still holds.
    pub(crate) fn prune(&mut self) {
        self.values.retain(|v| Arc::strong_count(v) > 1);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

impl Dedup<str> {
    pub(crate) fn str(&mut self, value: &str) -> Arc<str> {
        self.get(value, |v: &str| Arc::from(v))
    }
}

impl<T: Eq + Hash> Dedup<T> {
    pub(crate) fn value(&mut self, value: T) -> Arc<T> {
        if let Some(found) = self.values.get(&value) {
            return Arc::clone(found);
        }
        let made = Arc::new(value);
        self.values.insert(Arc::clone(&made));
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_copy_while_held_none_after() {
        let mut names = Dedup::<str>::default();
        let a = names.str("gpu0");
        let b = names.str("gpu0");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        names.prune();
        assert_eq!(names.len(), 0);
    }

    #[test]
    fn finding_gives_the_shared_copy_and_adds_nothing() {
        let mut names = Dedup::<str>::default();
        let held = names.str("gpus/n1");
        assert!(Arc::ptr_eq(names.find("gpus/n1").unwrap(), &held));
        assert!(names.find("gpus/n2").is_none());
        assert_eq!(names.len(), 1, "a name looked for and not found is not added");
    }
}
