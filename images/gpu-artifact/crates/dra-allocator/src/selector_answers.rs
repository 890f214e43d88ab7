//! What the engine remembers of selectors' answers (see `candidates`): per device slot (two bits)
//! for the most recently used expressions, forgotten for a device whose slice changed; per device
//! kind when the expression reads nothing of the card's common attributes; and per combination of
//! the values of the device parts an expression reads, when its tree tells which (see
//! `selector_parts`), so `memory >= 10Gi` is evaluated once per distinct memory rather than once
//! per device.

use std::collections::HashMap;
use std::hash::Hash;

use dra_cel::{CelError, CompiledSelector, DeviceContext, SelectorCache};

use crate::candidates::context_as;
use crate::fast_hash::FastMap;
use crate::inventory::Inventory;
use crate::selector_parts::{CommonSeen, KindKey, Part, kind_key, parts_of};

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
    /// Answers by the device's kind, for devices whose card's common attributes the expression
    /// does not read (see `selector_parts::kind_key`): one lookup per device, the same on every node.
    by_kind: FastMap<KindKey, Result<bool, CelError>>,
    last_used: u64,
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
    pub(crate) fn id(&mut self, expression: &str) -> (usize, Option<String>) {
        self.tick += 1;
        if let Some(&id) = self.ids.get(expression) {
            self.answers[id].last_used = self.tick;
            return (id, None);
        }
        let fresh = Answers {
            expression: expression.to_owned(),
            bits: Vec::new(),
            by_parts: FastMap::default(),
            by_kind: FastMap::default(),
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

    pub(crate) fn get(&self, id: usize, slot: u32) -> Option<bool> {
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

/// The CEL view of the device in `slot`.
fn context(cel: &SelectorCache, inventory: &Inventory, slot: u32) -> Result<DeviceContext, CelError> {
    let shared = inventory.device(slot).raw.kind.shared;
    context_as(cel, inventory, slot, shared)
}

/// The answer of one compiled selector for `slot`: remembered for the slot, else for its kind
/// (when its card's common attributes are not read), else for the values of the parts it reads,
/// else evaluated on the device's CEL view (built once per slot and call).
#[allow(clippy::too_many_arguments)]
pub(crate) fn answer(
    answers: &mut SelectorAnswers,
    id: usize,
    compiled: &CompiledSelector,
    cel: &SelectorCache,
    inventory: &Inventory,
    slot: u32,
    device: &mut Option<Result<DeviceContext, CelError>>,
    common_seen: &mut CommonSeen,
) -> Result<bool, CelError> {
    if let Some(known) = answers.get(id, slot) {
        return Ok(known);
    }
    let references = compiled.device_references();
    let by_kind = references.and_then(|r| kind_key(inventory, slot, r, common_seen));
    let known = by_kind.as_ref().and_then(|key| answers.answers[id].by_kind.get(key));
    let evaluated = match known {
        Some(result) => result.clone(),
        None => {
            let result = by_parts_or_evaluated(answers, id, compiled, cel, inventory, slot, device);
            remember(&mut answers.answers[id].by_kind, by_kind, &result);
            result
        }
    };
    if let Ok(matched) = evaluated {
        answers.set(id, slot, matched);
    }
    evaluated
}

fn by_parts_or_evaluated(
    answers: &mut SelectorAnswers,
    id: usize,
    compiled: &CompiledSelector,
    cel: &SelectorCache,
    inventory: &Inventory,
    slot: u32,
    device: &mut Option<Result<DeviceContext, CelError>>,
) -> Result<bool, CelError> {
    let parts = compiled.device_references().map(|r| parts_of(inventory, slot, r));
    let remembered = parts
        .as_ref()
        .and_then(|p| answers.answers[id].by_parts.get(p))
        .cloned();
    if let Some(result) = remembered {
        return result;
    }
    let result = match device.get_or_insert_with(|| context(cel, inventory, slot)) {
        Ok(ctx) => compiled.matches(ctx),
        Err(e) => Err(e.clone()),
    };
    remember(&mut answers.answers[id].by_parts, parts, &result);
    result
}

/// Keeps `result` under `key`, while the table has room (`MAX_KEYS`).
fn remember<K: Eq + Hash>(
    table: &mut FastMap<K, Result<bool, CelError>>,
    key: Option<K>,
    result: &Result<bool, CelError>,
) {
    if let Some(key) = key
        && table.len() < MAX_KEYS
    {
        table.insert(key, result.clone());
    }
}
