//! Greedy shrinking of a failing differential case: drop claims of the stream one by one, then
//! nodes (with their slices), then allocated claims, keeping each drop only if the same kind of
//! failure remains, and repeat until no single drop keeps it. The result is 1-minimal: removing
//! any one remaining part makes the failure go away. Knows nothing about allocation: the caller
//! says what a part is (`Shrinkable`) and whether a candidate still fails.

/// The kinds of parts a case is reduced by, in the order they are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Claim,
    Node,
    Allocated,
}

pub const ORDER: [Part; 3] = [Part::Claim, Part::Node, Part::Allocated];

/// A case that can lose single parts.
pub trait Shrinkable: Sized {
    fn count(&self, part: Part) -> usize;
    /// The case without the `index`-th part of that kind.
    fn without(&self, part: Part, index: usize) -> Self;
}

/// The smallest case reachable by single drops for which `fails` still holds (`case` must fail).
/// Returns it with the number of candidates tried.
pub fn shrink<S: Shrinkable>(case: S, mut fails: impl FnMut(&S) -> bool) -> (S, usize) {
    let mut case = case;
    let mut tried = 0;
    loop {
        let mut dropped_any = false;
        for part in ORDER {
            let mut index = 0;
            while index < case.count(part) {
                let candidate = case.without(part, index);
                tried += 1;
                if fails(&candidate) {
                    case = candidate;
                    dropped_any = true;
                } else {
                    index += 1;
                }
            }
        }
        if !dropped_any {
            return (case, tried);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Named {
        claims: Vec<&'static str>,
        nodes: Vec<&'static str>,
        allocated: Vec<&'static str>,
    }

    impl Named {
        fn list(&self, part: Part) -> &Vec<&'static str> {
            match part {
                Part::Claim => &self.claims,
                Part::Node => &self.nodes,
                Part::Allocated => &self.allocated,
            }
        }
    }

    impl Shrinkable for Named {
        fn count(&self, part: Part) -> usize {
            self.list(part).len()
        }

        fn without(&self, part: Part, index: usize) -> Self {
            let mut next = self.clone();
            let list = match part {
                Part::Claim => &mut next.claims,
                Part::Node => &mut next.nodes,
                Part::Allocated => &mut next.allocated,
            };
            list.remove(index);
            next
        }
    }

    fn case() -> Named {
        Named {
            claims: vec!["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"],
            nodes: vec!["n0", "n1", "n2", "n3", "n4"],
            allocated: vec!["a0", "a1", "a2"],
        }
    }

    #[test]
    fn shrinks_to_exactly_the_parts_the_failure_needs() {
        let fails = |c: &Named| c.claims.contains(&"c7") && c.nodes.contains(&"n3") && c.allocated.contains(&"a1");
        let (minimal, tried) = shrink(case(), fails);
        assert_eq!(
            minimal,
            Named {
                claims: vec!["c7"],
                nodes: vec!["n3"],
                allocated: vec!["a1"],
            }
        );
        // One pass drops 15 parts and keeps 3; the second pass only confirms the 3.
        assert_eq!(tried, 18 + 3);
    }

    #[test]
    fn a_failure_that_needs_two_claims_keeps_both_in_stream_order() {
        let fails = |c: &Named| {
            let at = |name| c.claims.iter().position(|x| *x == name);
            matches!((at("c2"), at("c8")), (Some(a), Some(b)) if a < b) && c.nodes.len() >= 2
        };
        let (minimal, _) = shrink(case(), fails);
        assert_eq!(minimal.claims, vec!["c2", "c8"]);
        assert_eq!(
            minimal.nodes,
            vec!["n3", "n4"],
            "the last two nodes survive greedy dropping"
        );
        assert!(minimal.allocated.is_empty());
    }
}
