//! Field paths with Go slice semantics. cel-go's estimator extends paths with `append` on slices
//! that share their backing array, so two extensions of one path can overwrite each other's last
//! step: for `m.exists(k, v, ...)` over a map both variables end up with the path of the values.
//! The API server's `MaxCost` depends on that, so the paths here share storage the same way.

use std::cell::RefCell;
use std::rc::Rc;

/// A Go `[]string`: a window of `len` steps on a shared array of capacity `cap`.
#[derive(Clone, Debug, Default)]
pub(crate) struct GoPath {
    array: Option<Rc<RefCell<Vec<String>>>>,
    len: usize,
    cap: usize,
}

impl GoPath {
    /// `[]string{name}`.
    pub(crate) fn root(name: &str) -> GoPath {
        GoPath {
            array: Some(Rc::new(RefCell::new(vec![name.to_owned()]))),
            len: 1,
            cap: 1,
        }
    }

    /// A fresh slice holding `steps` (`make` and `copy`).
    pub(crate) fn from_steps(steps: Vec<String>) -> GoPath {
        let len = steps.len();
        GoPath {
            array: (len > 0).then(|| Rc::new(RefCell::new(steps))),
            len,
            cap: len,
        }
    }

    /// `append(path, step)`: in place when the array has room (visible to every slice sharing
    /// it), else into a new array of twice the capacity (Go's growth for small slices).
    pub(crate) fn append(&self, step: &str) -> GoPath {
        if let Some(array) = &self.array
            && self.len < self.cap
        {
            let mut steps = array.borrow_mut();
            match steps.get_mut(self.len) {
                Some(slot) => *slot = step.to_owned(),
                None => steps.push(step.to_owned()),
            }
            return GoPath {
                array: Some(Rc::clone(array)),
                len: self.len + 1,
                cap: self.cap,
            };
        }
        let mut steps = self.steps();
        steps.push(step.to_owned());
        let cap = if self.cap == 0 {
            1
        } else {
            (2 * self.cap).max(self.len + 1)
        };
        GoPath {
            array: Some(Rc::new(RefCell::new(steps))),
            len: self.len + 1,
            cap,
        }
    }

    /// The steps as the shared array holds them now.
    pub(crate) fn steps(&self) -> Vec<String> {
        match &self.array {
            Some(array) => array.borrow().iter().take(self.len).cloned().collect(),
            None => Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn first(&self) -> Option<String> {
        self.array
            .as_ref()
            .filter(|_| self.len > 0)
            .and_then(|a| a.borrow().first().cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_to_a_shared_array_overwrite_each_other() {
        let range = GoPath::root("device").append("attributes").append("@values");
        let keys = range.append("@keys");
        let values = range.append("@values");
        assert_eq!(keys.steps(), ["device", "attributes", "@values", "@values"]);
        assert_eq!(values.steps(), keys.steps());
        // A full array is copied: the extensions stay apart.
        let attributes = GoPath::root("device").append("attributes");
        assert_eq!(attributes.append("a").steps()[2], "a");
        assert_eq!(attributes.append("b").steps()[2], "b");
        assert_eq!(GoPath::default().append("@items").steps(), ["@items"]);
    }
}
