//! The depth-first search for one claim: requests in order, alternatives of a `firstAvailable`
//! request in preference order, candidates in best-fit order; the first complete solution in
//! that order wins. Within a request, devices are chosen as a combination (increasing
//! candidate positions), which finds every solution the scheduler's permutation search finds. A step budget bounds the work on hopeless claims.

use dra_cel::Quantity;

use crate::capacity;
use crate::constraint::{Constraint, add_all};
use crate::fast_hash::FastSet;
use crate::inventory::Inventory;
use crate::request::{ALLOCATION_RESULTS_MAX_SIZE, Request};
use crate::usage::{Take, Usage};

#[derive(Clone)]
pub(crate) struct Pick {
    pub request: usize,
    pub alternative: usize,
    pub device: u32,
    pub take: Take,
    pub consumed: Option<Vec<Quantity>>,
    constraints: Vec<usize>,
}

/// The search gave up: too many steps.
pub(crate) struct BudgetExceeded;

pub(crate) struct Search<'s, 'a> {
    pub inventory: &'s Inventory,
    pub usage: &'s mut Usage,
    pub requests: &'s [Request<'a>],
    /// Candidates per request and alternative, in best-fit order.
    pub candidates: &'s [Vec<Vec<u32>>],
    pub constraints: Vec<Constraint<'a>>,
    pub picks: Vec<Pick>,
    pub steps: u64,
    pub budget: u64,
    in_claim: FastSet<u32>,
}

impl<'s, 'a> Search<'s, 'a> {
    pub(crate) fn new(
        inventory: &'s Inventory,
        usage: &'s mut Usage,
        requests: &'s [Request<'a>],
        candidates: &'s [Vec<Vec<u32>>],
        constraints: Vec<Constraint<'a>>,
        budget: u64,
    ) -> Self {
        Search {
            inventory,
            usage,
            requests,
            candidates,
            constraints,
            picks: Vec::new(),
            steps: 0,
            budget,
            in_claim: FastSet::default(),
        }
    }

    pub(crate) fn run(&mut self) -> Result<bool, BudgetExceeded> {
        let found = self.request(0)?;
        Ok(found)
    }

    /// Takes back every pick (the caller commits separately).
    pub(crate) fn release_all(&mut self) {
        while let Some(pick) = self.picks.pop() {
            self.undo(pick);
        }
    }

    fn request(&mut self, r: usize) -> Result<bool, BudgetExceeded> {
        if r == self.requests.len() {
            return Ok(true);
        }
        for a in 0..self.requests[r].alternatives.len() {
            let found = match self.requests[r].alternatives[a].count {
                Some(n) => self.pick_n(r, a, n, 0)?,
                None => self.pick_all(r, a)?,
            };
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn pick_n(&mut self, r: usize, a: usize, remaining: usize, start: usize) -> Result<bool, BudgetExceeded> {
        if remaining == 0 {
            return self.request(r + 1);
        }
        if self.picks.len() + remaining > ALLOCATION_RESULTS_MAX_SIZE {
            return Ok(false);
        }
        let candidates = &self.candidates[r][a];
        for (position, &candidate) in candidates.iter().enumerate().skip(start) {
            self.steps += 1;
            if self.steps > self.budget {
                return Err(BudgetExceeded);
            }
            let Some(pick) = self.try_pick(r, a, candidate) else {
                continue;
            };
            // The scheduler (1.37) never gives one request the same device twice, shared or not.
            let next = position + 1;
            self.picks.push(pick);
            if self.pick_n(r, a, remaining - 1, next)? {
                return Ok(true);
            }
            let pick = self.picks.pop().expect("pushed above");
            self.undo(pick);
        }
        Ok(false)
    }

    fn pick_all(&mut self, r: usize, a: usize) -> Result<bool, BudgetExceeded> {
        let candidates = &self.candidates[r][a];
        if candidates.is_empty() || self.picks.len() + candidates.len() > ALLOCATION_RESULTS_MAX_SIZE {
            return Ok(false);
        }
        let before = self.picks.len();
        for &device in candidates {
            match self.try_pick(r, a, device) {
                Some(pick) => self.picks.push(pick),
                None => {
                    self.undo_to(before);
                    return Ok(false);
                }
            }
        }
        if self.request(r + 1)? {
            return Ok(true);
        }
        self.undo_to(before);
        Ok(false)
    }

    fn undo_to(&mut self, len: usize) {
        while self.picks.len() > len {
            let pick = self.picks.pop().expect("longer than len");
            self.undo(pick);
        }
    }

    fn try_pick(&mut self, r: usize, a: usize, index: u32) -> Option<Pick> {
        let device = self.inventory.device(index);
        let request = &self.requests[r];
        let alternative = &request.alternatives[a];
        if !self.inventory.tolerated(index, alternative.tolerations) {
            return None;
        }
        // Within a claim a device that is not multi-allocatable serves one pick, admin or not (the
        // scheduler marks it allocating for the claim either way). Admin access skips only the
        // "in use by others" check: its counters and a share's capacity still count while the
        // claim is allocated, as `allocateDevice` runs `checkAvailableCounters` for it too.
        if !device.raw.kind.shared && self.in_claim.contains(&index) {
            return None;
        }
        let take = match (alternative.admin, device.raw.kind.shared) {
            (true, true) => Take::AdminShare,
            (true, false) => Take::Admin,
            (false, true) => Take::Share,
            (false, false) => Take::Exclusive,
        };
        if take == Take::Exclusive && self.usage.is_exclusive(index) {
            return None;
        }
        if self.usage.charges_counters(index, take) && !self.usage.counters_fit(self.inventory, device) {
            return None;
        }
        if take.holds_card() && !self.usage.card_allows(index, device, take) {
            return None;
        }
        let already = if device.raw.kind.shared {
            self.usage.shared_capacity.get(&index).map(Vec::as_slice)
        } else {
            None
        };
        let consumed = capacity::consume(&device.raw.kind.capacity, alternative.capacity.as_ref(), already)?;
        let driver = self.inventory.driver_of(index);
        let constraints = add_all(
            &mut self.constraints,
            request.name,
            &alternative.result_name,
            &device.raw.attributes(),
            driver,
        )?;
        let consumed = if device.raw.kind.shared { Some(consumed) } else { None };
        self.usage.take(self.inventory, index, take, consumed.as_deref());
        if !device.raw.kind.shared {
            self.in_claim.insert(index);
        }
        Some(Pick {
            request: r,
            alternative: a,
            device: index,
            take,
            consumed,
            constraints,
        })
    }

    fn undo(&mut self, pick: Pick) {
        for &c in pick.constraints.iter().rev() {
            self.constraints[c].remove_last();
        }
        self.usage
            .release(self.inventory, pick.device, pick.take, pick.consumed.as_deref());
        if !self.inventory.device(pick.device).raw.kind.shared {
            self.in_claim.remove(&pick.device);
        }
    }
}
