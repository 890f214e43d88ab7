//! The `device` variable of a DRA selector, built once per device: `device.driver`,
//! `device.allowMultipleAllocations`, `device.attributes[domain].name` and
//! `device.capacity[domain].name`, with qualified names split at the first `/` and names
//! without a domain placed in the driver's domain (as `parseQualifiedName` in the scheduler's
//! `cel/compile.go` does).

use std::collections::HashMap;
use std::sync::Arc;

use cel::{Context, Env, Value};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

use crate::kubernetes_library::{quantity_value, semver_value};
use crate::{CelError, Quantity, Semver};

/// Domains that always resolve to a (possibly empty) map, so `device.attributes["<domain>"]`
/// on a device without attributes in that domain yields an empty map as in the scheduler,
/// where every unknown domain does.
const WELL_KNOWN_DOMAINS: [&str; 2] = ["resource.kubernetes.io", "gpu.deckhouse.io"];

/// One device, ready to have selectors evaluated against it.
pub struct DeviceContext {
    context: Context<'static, 'static>,
}

impl std::fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceContext")
    }
}

fn split_qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// One attribute value as a selector sees it (the one value a `DeviceAttribute` carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributeValue<'a> {
    Int(i64),
    Bool(bool),
    String(&'a str),
    Version(&'a str),
}

impl<'a> AttributeValue<'a> {
    /// The value a `DeviceAttribute` carries, or `None` when it has none.
    pub fn of(attribute: &'a DeviceAttribute) -> Option<AttributeValue<'a>> {
        if let Some(i) = attribute.int {
            return Some(AttributeValue::Int(i));
        }
        if let Some(b) = attribute.bool {
            return Some(AttributeValue::Bool(b));
        }
        if let Some(s) = &attribute.string {
            return Some(AttributeValue::String(s));
        }
        attribute.version.as_deref().map(AttributeValue::Version)
    }
}

fn attribute_value(name: &str, attribute: Option<AttributeValue<'_>>) -> Result<Value, CelError> {
    match attribute {
        Some(AttributeValue::Int(i)) => Ok(Value::Int(i)),
        Some(AttributeValue::Bool(b)) => Ok(Value::Bool(b)),
        Some(AttributeValue::String(s)) => Ok(Value::String(Arc::new(s.to_owned()))),
        Some(AttributeValue::Version(v)) => {
            let parsed = Semver::parse(v)
                .map_err(|e| CelError::device(format!("attribute {name}: parse semantic version: {e}")))?;
            Ok(semver_value(parsed))
        }
        None => Err(CelError::device(format!(
            "attribute {name}: unsupported attribute value"
        ))),
    }
}

impl DeviceContext {
    /// Builds the `device` variable for `device` of `driver`. Fails (as the scheduler does at
    /// evaluation time) when an attribute has no value or a malformed version, or a capacity is
    /// not a quantity.
    pub fn new(env: &Arc<Env>, driver: &str, device: &Device) -> Result<DeviceContext, CelError> {
        let mut capacity = Vec::new();
        for (name, cap) in device.capacity.iter().flatten() {
            let value = Quantity::parse(&cap.value.0).map_err(|e| CelError::device(format!("capacity {name}: {e}")))?;
            capacity.push((name.as_str(), value));
        }
        DeviceContext::from_parts(
            env,
            driver,
            device.allow_multiple_allocations.unwrap_or(false),
            device
                .attributes
                .iter()
                .flatten()
                .map(|(name, attribute)| (name.as_str(), AttributeValue::of(attribute))),
            capacity,
        )
    }

    /// Builds the `device` variable from its parts: qualified (or driver-local) attribute names
    /// with their values (`None`: an attribute without a value), and parsed capacities.
    pub fn from_parts<'a>(
        env: &Arc<Env>,
        driver: &str,
        allow_multiple_allocations: bool,
        device_attributes: impl IntoIterator<Item = (&'a str, Option<AttributeValue<'a>>)>,
        device_capacity: impl IntoIterator<Item = (&'a str, Quantity)>,
    ) -> Result<DeviceContext, CelError> {
        let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
        let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for domain in WELL_KNOWN_DOMAINS.iter().copied().chain([driver]) {
            attributes.entry(domain.to_owned()).or_default();
            capacity.entry(domain.to_owned()).or_default();
        }
        for (name, attribute) in device_attributes {
            let (domain, id) = split_qualified(name, driver);
            attributes
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), attribute_value(name, attribute)?);
        }
        for (name, value) in device_capacity {
            let (domain, id) = split_qualified(name, driver);
            capacity
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), quantity_value(value));
        }
        let mut fields: HashMap<String, Value> = HashMap::new();
        fields.insert("driver".to_owned(), Value::String(Arc::new(driver.to_owned())));
        fields.insert(
            "allowMultipleAllocations".to_owned(),
            Value::Bool(allow_multiple_allocations),
        );
        fields.insert("attributes".to_owned(), Value::from(attributes));
        fields.insert("capacity".to_owned(), Value::from(capacity));
        let mut context = Context::with_env(Arc::clone(env));
        context.add_variable_from_value("device", Value::from(fields));
        Ok(DeviceContext { context })
    }

    pub(crate) fn context(&self) -> &Context<'static, 'static> {
        &self.context
    }
}
