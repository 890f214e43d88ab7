//! The order of a churn: arrivals of Pods by size and departures of Pods still placed, drawn from a
//! seed, so that two runs of the same plan differ only in where the devices were taken from.

use allocator_workloads::Rng;

/// One step of a churn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A Pod asking for the size `SIZES_GI[i]` arrives.
    Arrive(usize),
    /// The Pod at this index (modulo how many are placed) among those placed, oldest first, departs.
    Depart(usize),
}

/// `steps` steps from `seed`: a departure one time in `depart_one_in` once `warm_up` Pods arrived
/// (never more departures than arrivals), and sizes weighted 4:3:2:1 from the smallest.
pub fn churn_plan(seed: u64, steps: usize, warm_up: usize, depart_one_in: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut plan = Vec::with_capacity(steps);
    let (mut arrived, mut departed) = (0usize, 0usize);
    while plan.len() < steps {
        let placed = arrived - departed;
        if arrived >= warm_up && placed > 0 && rng.below(depart_one_in) == 0 {
            plan.push(Step::Depart(rng.below(1 << 16) as usize));
            departed += 1;
        } else {
            let size = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3][rng.below(10) as usize];
            plan.push(Step::Arrive(size));
            arrived += 1;
        }
    }
    plan
}
