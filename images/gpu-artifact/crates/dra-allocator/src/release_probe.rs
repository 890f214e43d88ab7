//! "Would this Pod's claims fit on this node if those claims gave their devices back?": the
//! question priority preemption asks of the engine for every set of victims it weighs. The
//! released claims' holdings are given back, the Pod's claims are searched on the node in order
//! (each one's picks held while the next is searched, as the controller allocates a Pod's claims
//! one after another on one node), and everything is taken again before the answer returns: the
//! engine is left exactly as it was.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::allocator::Allocator;
use crate::error::AllocationError;
use crate::request::claim_name;

/// The id the probe holds a claim's picks under while the next claim is searched: no claim uid
/// or `namespace/name` has this form.
fn probe_id(index: usize) -> String {
    format!("release-probe:{index}")
}

impl Allocator {
    /// True when every claim of `claims` fits on `node` once the claims with ids `released`
    /// (see [`crate::claim_id`]) hold nothing. Changes nothing the caller can see.
    pub fn fits_if_released(
        &mut self,
        claims: &[&ResourceClaim],
        node: &Node,
        released: &[&str],
    ) -> Result<bool, AllocationError> {
        self.set_released(released, true);
        let answer = self.fits_in_order(claims, node);
        for index in 0..claims.len() {
            self.remove_claim(&probe_id(index));
        }
        self.set_released(released, false);
        answer
    }

    fn fits_in_order(&mut self, claims: &[&ResourceClaim], node: &Node) -> Result<bool, AllocationError> {
        for (index, claim) in claims.iter().enumerate() {
            let Some(allocation) = self.allocate(claim, Some(node))? else {
                return Ok(false);
            };
            let id = probe_id(index);
            let name = format!("{} (probe)", claim_name(claim));
            self.holdings.set(
                &id,
                &name,
                Some(&allocation),
                &mut self.inventory,
                &mut self.usage,
                &mut self.reach,
            );
        }
        Ok(true)
    }

    /// Gives back (`release`) or takes again what the claims `ids` hold.
    fn set_released(&mut self, ids: &[&str], release: bool) {
        for id in ids {
            if release {
                self.holdings
                    .release_claim(id, &self.inventory, &mut self.usage, &mut self.reach);
            } else {
                self.holdings
                    .take_claim(id, &self.inventory, &mut self.usage, &mut self.reach);
            }
        }
    }
}
