//! Which devices can serve a request alternative in a scope (see `scope`): those it reaches that
//! match the class selectors and the request selectors (CEL), cached per device and expression
//! and, as a best-fit-ordered list, per (class, selectors, scope). Availability (in use, counters,
//! capacity, taints, constraints) is not part of this: it changes with every allocation.

use std::sync::Arc;

use crate::AllocationError;
use crate::allocator::Allocator;
use crate::request::Alternative;
use crate::scope::Scope;

enum Origin<'a> {
    Class(&'a str),
    Claim(&'a str),
}

impl Allocator {
    fn selector_matches(&mut self, device: usize, expression: &str) -> Result<bool, dra_cel::CelError> {
        let next_id = self.expression_ids.len();
        let id = *self.expression_ids.entry(expression.to_owned()).or_insert(next_id);
        if id == self.selector_results.len() {
            self.selector_results.push(vec![0; self.inventory.devices.len()]);
        }
        match self.selector_results[id][device] {
            1 => return Ok(false),
            2 => return Ok(true),
            _ => {}
        }
        let compiled = self.cel.get_or_compile(expression)?;
        if self.contexts[device].is_none() {
            let d = &self.inventory.devices[device];
            self.contexts[device] = Some(self.cel.device_context(&d.driver, &d.device));
        }
        let context = self.contexts[device]
            .as_ref()
            .expect("built above")
            .as_ref()
            .map_err(Clone::clone)?;
        let matched = compiled.matches(context)?;
        self.selector_results[id][device] = if matched { 2 } else { 1 };
        Ok(matched)
    }

    fn device_matches(
        &mut self,
        claim: &str,
        device: usize,
        alternative: &Alternative<'_>,
    ) -> Result<bool, AllocationError> {
        let class_name = alternative.class.metadata.name.as_deref().unwrap_or_default();
        let class_selectors = alternative.class.spec.selectors.as_deref().unwrap_or_default();
        let selectors = class_selectors
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
        for (origin, index, selector) in selectors {
            let Some(cel) = &selector.cel else { continue };
            match self.selector_matches(device, &cel.expression) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(source) => {
                    return Err(match origin {
                        Origin::Class(class) => AllocationError::ClassSelector {
                            claim: claim.to_owned(),
                            class: class.to_owned(),
                            index,
                            source,
                        },
                        Origin::Claim(request) => AllocationError::ClaimSelector {
                            claim: claim.to_owned(),
                            request: request.to_owned(),
                            index,
                            source,
                        },
                    });
                }
            }
        }
        Ok(true)
    }

    /// The best-fit-ordered devices that match `alternative` and are reachable in `scope`.
    pub(crate) fn candidates_for(
        &mut self,
        claim: &str,
        alternative: &Alternative<'_>,
        scope: Scope<'_>,
    ) -> Result<Arc<Vec<usize>>, AllocationError> {
        let mut key = String::new();
        key.push_str(alternative.class.metadata.name.as_deref().unwrap_or_default());
        for s in alternative.selectors.iter().filter_map(|s| s.cel.as_ref()) {
            key.push('\u{0}');
            key.push_str(&s.expression);
        }
        key.push('\u{1}');
        key.push_str(&scope.key());
        if let Some(found) = self.candidates.get(&key) {
            return Ok(Arc::clone(found));
        }
        let mut matching = Vec::new();
        for device in self.reach.devices(scope) {
            // Devices with binding conditions need the scheduler's binding flow; we never pick them.
            if self.inventory.devices[device].has_binding_conditions {
                continue;
            }
            if self.device_matches(claim, device, alternative)? {
                matching.push(device);
            }
        }
        let inventory = &self.inventory;
        matching.sort_by(|a, b| {
            let (da, db) = (&inventory.devices[*a], &inventory.devices[*b]);
            da.fit
                .cmp(&db.fit)
                .then_with(|| inventory.pools[da.pool].name.cmp(&inventory.pools[db.pool].name))
                .then_with(|| da.name.cmp(&db.name))
        });
        let list = Arc::new(matching);
        self.candidates.insert(key, Arc::clone(&list));
        Ok(list)
    }
}
