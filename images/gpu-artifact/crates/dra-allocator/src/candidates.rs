//! Which devices can serve a request alternative in a scope (see `scope`, `reach`): those it
//! reaches that match the class selectors and the request selectors (CEL), in best-fit order.
//! Each selector's answer is remembered per device (two bits) for the most recently used
//! expressions, and forgotten for a device whose slice changed; and, when the expression's tree
//! tells which device parts it reads, per combination of their values, so `memory >= 10Gi` is
//! evaluated once per distinct memory rather than once per device. A device's CEL view is built
//! only while an expression new to it is evaluated, then dropped: kept for every device it would
//! not fit the controller's memory. Availability (in use, counters, capacity, taints, constraints) is
//! not part of this: it changes with every allocation.

use std::collections::HashMap;
use std::sync::Arc;

use dra_cel::{CelError, CompiledSelector, DeviceContext, DeviceReference, Quantity, SelectorCache};

use crate::AllocationError;
use crate::allocator::Allocator;
use crate::best_fit::shares_first;
use crate::device::AttrValue;
use crate::fast_hash::FastMap;
use crate::inventory::Inventory;
use crate::request::Alternative;
use crate::scope::Scope;

/// Expressions whose per-device answers are kept; the least recently used goes first.
const MAX_EXPRESSIONS: usize = 128;

/// Distinct combinations of the device parts an expression reads whose answer is kept.
const MAX_KEYS: usize = 4096;

struct Answers {
    expression: String,
    /// Two bits per device slot: 0 not evaluated, 1 no match, 2 match.
    bits: Vec<u8>,
    /// Answers by the values of the device parts the expression reads (see
    /// `dra_cel::DeviceReference`), when its tree tells which.
    by_parts: FastMap<Vec<Part>, Result<bool, CelError>>,
    last_used: u64,
}

/// The value of one part of a device a selector reads, as the selector sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Part {
    Driver(Arc<str>),
    Shared(bool),
    /// The qualified attribute, the bare one (when the domain is the driver's), whether the
    /// domain exists at all.
    Attribute(Option<AttrValue>, Option<AttrValue>, bool),
    Capacity(Option<Quantity>, Option<Quantity>, bool),
}

const WELL_KNOWN_DOMAINS: [&str; 2] = ["resource.kubernetes.io", "gpu.deckhouse.io"];

fn parts_of(inventory: &Inventory, slot: u32, references: &[DeviceReference]) -> Vec<Part> {
    let device = inventory.device(slot);
    let driver = &inventory.pool(device.pool).driver;
    let known = |domain: &str| WELL_KNOWN_DOMAINS.contains(&domain) || domain == &**driver;
    references
        .iter()
        .map(|reference| match reference {
            DeviceReference::Driver => Part::Driver(driver.clone()),
            DeviceReference::AllowMultipleAllocations => Part::Shared(device.raw.kind.shared),
            DeviceReference::Attribute { domain, name } => {
                let attributes = device.raw.attributes();
                let qualified = attributes.get_qualified(domain, name).cloned();
                let bare = (domain == &**driver).then(|| attributes.get(name).cloned()).flatten();
                Part::Attribute(qualified, bare, known(domain) || attributes.has_domain(domain))
            }
            DeviceReference::Capacity { domain, name } => {
                let capacity = &device.raw.kind.capacity;
                let qualified = capacity.get_qualified(domain, name);
                let bare = (domain == &**driver).then(|| capacity.get(name)).flatten();
                Part::Capacity(qualified, bare, known(domain) || capacity.has_domain(domain))
            }
        })
        .collect()
}

#[derive(Default)]
pub(crate) struct SelectorAnswers {
    ids: HashMap<String, usize>,
    answers: Vec<Answers>,
    tick: u64,
}

impl SelectorAnswers {
    /// The id of `expression`'s answers, making room if needed (the evicted expression is
    /// returned so its compiled form can go too).
    fn id(&mut self, expression: &str) -> (usize, Option<String>) {
        self.tick += 1;
        if let Some(&id) = self.ids.get(expression) {
            self.answers[id].last_used = self.tick;
            return (id, None);
        }
        let fresh = Answers {
            expression: expression.to_owned(),
            bits: Vec::new(),
            by_parts: FastMap::default(),
            last_used: self.tick,
        };
        self.ids.insert(expression.to_owned(), self.answers.len());
        if self.answers.len() < MAX_EXPRESSIONS {
            self.answers.push(fresh);
            return (self.answers.len() - 1, None);
        }
        // Reuse the least recently used place, so the ids handed out before stay valid.
        let oldest = (0..self.answers.len())
            .min_by_key(|i| self.answers[*i].last_used)
            .expect("not empty");
        let gone = std::mem::replace(&mut self.answers[oldest], fresh);
        self.ids.remove(&gone.expression);
        self.ids.insert(expression.to_owned(), oldest);
        (oldest, Some(gone.expression))
    }

    fn get(&self, id: usize, slot: u32) -> Option<bool> {
        let byte = self.answers[id].bits.get(slot as usize / 4).copied().unwrap_or(0);
        match (byte >> ((slot % 4) * 2)) & 3 {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    fn set(&mut self, id: usize, slot: u32, matched: bool) {
        let bits = &mut self.answers[id].bits;
        let at = slot as usize / 4;
        if bits.len() <= at {
            bits.resize(at + 1, 0);
        }
        let shift = (slot % 4) * 2;
        bits[at] = (bits[at] & !(3 << shift)) | ((if matched { 2 } else { 1 }) << shift);
    }

    /// Forgets every answer about `slots` (their devices changed).
    pub(crate) fn forget_slots(&mut self, slots: &[u32]) {
        for answers in &mut self.answers {
            for slot in slots {
                if let Some(byte) = answers.bits.get_mut(*slot as usize / 4) {
                    *byte &= !(3 << ((slot % 4) * 2));
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Origin<'a> {
    Class(&'a str),
    Claim(&'a str),
}

/// The CEL view of the device in `slot`.
fn context(cel: &SelectorCache, inventory: &Inventory, slot: u32) -> Result<DeviceContext, CelError> {
    let shared = inventory.device(slot).raw.kind.shared;
    context_as(cel, inventory, slot, shared)
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

/// The answer of one compiled selector for `slot`: remembered for the slot, else for the values
/// of the parts it reads, else evaluated on the device's CEL view (built once per slot and call).
fn answer(
    answers: &mut SelectorAnswers,
    id: usize,
    compiled: &CompiledSelector,
    cel: &SelectorCache,
    inventory: &Inventory,
    slot: u32,
    device: &mut Option<Result<DeviceContext, CelError>>,
) -> Result<bool, CelError> {
    if let Some(known) = answers.get(id, slot) {
        return Ok(known);
    }
    let parts = compiled.device_references().map(|r| parts_of(inventory, slot, r));
    let remembered = parts
        .as_ref()
        .and_then(|p| answers.answers[id].by_parts.get(p))
        .cloned();
    let evaluated = match remembered {
        Some(result) => result,
        None => {
            let result = match device.get_or_insert_with(|| context(cel, inventory, slot)) {
                Ok(ctx) => compiled.matches(ctx),
                Err(e) => Err(e.clone()),
            };
            let by_parts = &mut answers.answers[id].by_parts;
            if let Some(parts) = parts
                && by_parts.len() < MAX_KEYS
            {
                by_parts.insert(parts, result.clone());
            }
            result
        }
    };
    if let Ok(matched) = evaluated {
        answers.set(id, slot, matched);
    }
    evaluated
}

/// One selector of an alternative, compiled on first need.
struct Selector<'a> {
    origin: Origin<'a>,
    index: usize,
    id: usize,
    expression: &'a str,
    compiled: Option<Result<Arc<CompiledSelector>, CelError>>,
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
                Ok(compiled) => answer(answers, selector.id, compiled, cel, inventory, slot, &mut device),
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
