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

fn attribute_value(name: &str, attribute: &DeviceAttribute) -> Result<Value, CelError> {
    if let Some(i) = attribute.int {
        return Ok(Value::Int(i));
    }
    if let Some(b) = attribute.bool {
        return Ok(Value::Bool(b));
    }
    if let Some(s) = &attribute.string {
        return Ok(Value::String(Arc::new(s.clone())));
    }
    if let Some(v) = &attribute.version {
        let parsed =
            Semver::parse(v).map_err(|e| CelError::device(format!("attribute {name}: parse semantic version: {e}")))?;
        return Ok(semver_value(parsed));
    }
    Err(CelError::device(format!(
        "attribute {name}: unsupported attribute value"
    )))
}

impl DeviceContext {
    /// Builds the `device` variable for `device` of `driver`. Fails (as the scheduler does at
    /// evaluation time) when an attribute has no value or a malformed version, or a capacity is
    /// not a quantity.
    pub fn new(env: &Arc<Env>, driver: &str, device: &Device) -> Result<DeviceContext, CelError> {
        let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
        let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for domain in WELL_KNOWN_DOMAINS.iter().copied().chain([driver]) {
            attributes.entry(domain.to_owned()).or_default();
            capacity.entry(domain.to_owned()).or_default();
        }
        for (name, attribute) in device.attributes.iter().flatten() {
            let (domain, id) = split_qualified(name, driver);
            attributes
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), attribute_value(name, attribute)?);
        }
        for (name, cap) in device.capacity.iter().flatten() {
            let (domain, id) = split_qualified(name, driver);
            let value = Quantity::parse(&cap.value.0).map_err(|e| CelError::device(format!("capacity {name}: {e}")))?;
            capacity
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), quantity_value(value));
        }
        let mut fields: HashMap<String, Value> = HashMap::new();
        fields.insert("driver".to_owned(), Value::String(Arc::new(driver.to_owned())));
        fields.insert(
            "allowMultipleAllocations".to_owned(),
            Value::Bool(device.allow_multiple_allocations.unwrap_or(false)),
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
