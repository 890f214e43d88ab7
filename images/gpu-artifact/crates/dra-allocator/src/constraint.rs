//! Claim constraints: `matchAttribute` (all devices of the named requests carry the same value)
//! and `distinctAttribute` (all carry different values). A device without the attribute never
//! satisfies either. Attribute lookup follows the scheduler's `lookupAttribute`: the fully
//! qualified name, or the bare name when the domain is the device's driver.

use k8s_openapi::api::resource::v1::DeviceConstraint;

use crate::device::{AttrValue, Attributes};

pub(crate) struct Constraint<'a> {
    requests: &'a [String],
    attribute: &'a str,
    distinct: bool,
    values: Vec<AttrValue>,
}

impl<'a> Constraint<'a> {
    pub(crate) fn from_claim(constraints: &'a [DeviceConstraint]) -> Vec<Constraint<'a>> {
        constraints
            .iter()
            .filter_map(|c| {
                let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(a), _) => (a.as_str(), false),
                    (None, Some(a)) => (a.as_str(), true),
                    (None, None) => return None,
                };
                Some(Constraint {
                    requests: c.requests.as_deref().unwrap_or_default(),
                    attribute,
                    distinct,
                    values: Vec::new(),
                })
            })
            .collect()
    }

    fn applies(&self, request: &str, result_name: &str) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == request || r == result_name)
    }

    /// Adds the device if the constraint still holds; returns whether it was added.
    pub(crate) fn add(
        &mut self,
        request: &str,
        result_name: &str,
        attributes: &Attributes,
        driver: &str,
    ) -> Option<bool> {
        if !self.applies(request, result_name) {
            return Some(false);
        }
        let value = attributes.lookup(self.attribute, driver)?;
        let ok = if self.distinct {
            !self.values.contains(value)
        } else {
            self.values.first().is_none_or(|v| v == value)
        };
        if !ok {
            return None;
        }
        self.values.push(value.clone());
        Some(true)
    }

    pub(crate) fn remove_last(&mut self) {
        self.values.pop();
    }
}

/// Adds a device to every constraint or to none. Returns the indices that recorded it.
pub(crate) fn add_all(
    constraints: &mut [Constraint<'_>],
    request: &str,
    result_name: &str,
    attributes: &Attributes,
    driver: &str,
) -> Option<Vec<usize>> {
    let mut added = Vec::new();
    for (i, c) in constraints.iter_mut().enumerate() {
        match c.add(request, result_name, attributes, driver) {
            Some(true) => added.push(i),
            Some(false) => {}
            None => {
                for j in added {
                    constraints[j].remove_last();
                }
                return None;
            }
        }
    }
    Some(added)
}
