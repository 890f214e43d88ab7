//! Which devices can serve a request alternative in a scope (see `scope`, `reach`): those it
//! reaches that match the class selectors and the request selectors (CEL), in best-fit order.
//! Each selector's answer is remembered (see `selector_answers`). A device's CEL view is built
//! only while an expression new to it is evaluated, then dropped: kept for every device it would
//! not fit the controller's memory. Availability (in use, counters, capacity, taints, constraints) is
//! not part of this: it changes with every allocation.

use std::sync::Arc;

use dra_cel::{CelError, CompiledSelector, DeviceContext, SelectorCache};

use crate::AllocationError;
use crate::allocator::Allocator;
use crate::best_fit::shares_first;
use crate::inventory::Inventory;
use crate::request::Alternative;
use crate::scope::Scope;
use crate::selector_answers::{SelectorAnswers, answer};
use crate::selector_parts::CommonSeen;

#[derive(Clone, Copy)]
enum Origin<'a> {
    Class(&'a str),
    Claim(&'a str),
}

/// The CEL view of the device in `slot`, with `device.allowMultipleAllocations` as `shared` says
/// (the ResourceSlice tracker leaves it unset, so false: see `taint_rule_hits`).
pub(crate) fn context_as(
    cel: &SelectorCache,
    inventory: &Inventory,
    slot: u32,
    shared: bool,
) -> Result<DeviceContext, CelError> {
    let device = inventory.device(slot);
    DeviceContext::from_parts(
        cel.env(),
        inventory.driver_of(slot),
        shared,
        device
            .raw
            .attributes()
            .iter()
            .map(|(name, value)| (name, value.as_cel())),
        device
            .raw
            .kind
            .capacity
            .0
            .iter()
            .map(|(name, value, _)| (&**name, *value)),
    )
}

/// One selector of an alternative, compiled on first need.
struct Selector<'a> {
    origin: Origin<'a>,
    index: usize,
    id: usize,
    expression: &'a str,
    compiled: Option<Result<Arc<CompiledSelector>, CelError>>,
    /// Whether it reads the common attributes of the card last seen (see `kind_key`).
    common_seen: CommonSeen,
}

/// Whether `slot` matches every selector (class first, then the request's).
fn device_matches(
    answers: &mut SelectorAnswers,
    cel: &SelectorCache,
    inventory: &Inventory,
    claim: &str,
    slot: u32,
    selectors: &mut [Selector<'_>],
) -> Result<bool, AllocationError> {
    let mut device: Option<Result<DeviceContext, CelError>> = None;
    for selector in selectors.iter_mut() {
        let matched = match answers.get(selector.id, slot) {
            Some(known) => Ok(known),
            None => match selector
                .compiled
                .get_or_insert_with(|| cel.get_or_compile(selector.expression))
            {
                Ok(compiled) => answer(
                    answers,
                    selector.id,
                    compiled,
                    cel,
                    inventory,
                    slot,
                    &mut device,
                    &mut selector.common_seen,
                ),
                Err(e) => Err(e.clone()),
            },
        };
        match matched {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(source) => {
                return Err(match selector.origin {
                    Origin::Class(class) => AllocationError::ClassSelector {
                        claim: claim.to_owned(),
                        class: class.to_owned(),
                        index: selector.index,
                        source,
                    },
                    Origin::Claim(request) => AllocationError::ClaimSelector {
                        claim: claim.to_owned(),
                        request: request.to_owned(),
                        index: selector.index,
                        source,
                    },
                });
            }
        }
    }
    Ok(true)
}

impl Allocator {
    /// The best-fit-ordered devices that match `alternative` and are reachable in `scope`.
    pub(crate) fn candidates_for(
        &mut self,
        claim: &str,
        alternative: &Alternative<'_>,
        scope: Scope<'_>,
    ) -> Result<Vec<u32>, AllocationError> {
        let class_name = alternative.class.metadata.name.as_deref().unwrap_or_default();
        let class_selectors = alternative.class.spec.selectors.as_deref().unwrap_or_default();
        let mut selectors = Vec::new();
        let named = class_selectors
            .iter()
            .enumerate()
            .map(|(i, s)| (Origin::Class(class_name), i, s))
            .chain(
                alternative
                    .selectors
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (Origin::Claim(&alternative.result_name), i, s)),
            );
        for (origin, index, selector) in named {
            let Some(cel) = &selector.cel else { continue };
            let (id, evicted) = self.answers.id(&cel.expression);
            if let Some(expression) = evicted {
                self.cel.forget(&expression);
            }
            selectors.push(Selector {
                origin,
                index,
                id,
                expression: cel.expression.as_str(),
                compiled: None,
                common_seen: CommonSeen::default(),
            });
        }
        let reach = self.reach.scope_devices(&self.inventory, scope);
        let mut matching = Vec::new();
        for &slot in reach.iter() {
            // Devices with binding conditions need the scheduler's binding flow; we never pick them.
            if self.inventory.device(slot).raw.kind.has_binding_conditions {
                continue;
            }
            if device_matches(
                &mut self.answers,
                &self.cel,
                &self.inventory,
                claim,
                slot,
                &mut selectors,
            )? {
                matching.push(slot);
            }
        }
        drop(reach);
        shares_first(&self.inventory, &self.usage, &mut matching);
        Ok(matching)
    }
}
