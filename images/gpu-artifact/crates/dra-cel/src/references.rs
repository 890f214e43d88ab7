//! Which parts of the device a selector reads, when that can be told from its tree: every use of
//! `device` is `device.driver`, `device.allowMultipleAllocations`, or one attribute or capacity
//! named by constant strings (`device.attributes["<domain>"].<name>`, with `has(...)` or an index
//! in place of the field). Then two devices equal in those parts get the same answer, and an
//! allocator can evaluate the selector once per distinct combination instead of once per device
//! (`memory >= 10Gi` over 200,000 offers has a handful of distinct memories). Any other use of
//! `device` (a whole map iterated, a variable shadowing it) makes the answer `None`.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// One part of the device a selector reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeviceReference {
    Driver,
    AllowMultipleAllocations,
    /// `device.attributes[domain].name`.
    Attribute {
        domain: String,
        name: String,
    },
    /// `device.capacity[domain].name`.
    Capacity {
        domain: String,
        name: String,
    },
}

fn string_literal(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

/// `device.<map>[<domain>]`: (map, domain).
fn domain_of(e: &IdedExpr) -> Option<(&str, &str)> {
    let Expr::Call(call) = &e.expr else { return None };
    let [map, key] = call.args.as_slice() else { return None };
    if call.func_name != "_[_]" || call.target.is_some() {
        return None;
    }
    let Expr::Select(select) = &map.expr else {
        return None;
    };
    if select.test || !matches!(&select.operand.expr, Expr::Ident(name) if name == "device") {
        return None;
    }
    if select.field != "attributes" && select.field != "capacity" {
        return None;
    }
    Some((select.field.as_str(), string_literal(key)?))
}

fn reference(map: &str, domain: &str, name: &str) -> DeviceReference {
    let (domain, name) = (domain.to_owned(), name.to_owned());
    if map == "attributes" {
        DeviceReference::Attribute { domain, name }
    } else {
        DeviceReference::Capacity { domain, name }
    }
}

/// The device parts `expr` reads, or `None` when it uses `device` any other way.
pub(crate) fn device_references(expr: &IdedExpr) -> Option<Vec<DeviceReference>> {
    let mut found = Vec::new();
    walk(expr, &mut found)?;
    found.sort_by_key(|r| format!("{r:?}"));
    found.dedup();
    Some(found)
}

fn walk(e: &IdedExpr, found: &mut Vec<DeviceReference>) -> Option<()> {
    match &e.expr {
        Expr::Ident(name) => (name != "device").then_some(()),
        Expr::Select(select) => {
            if let Expr::Ident(name) = &select.operand.expr
                && name == "device"
            {
                return match select.field.as_str() {
                    "driver" if !select.test => {
                        found.push(DeviceReference::Driver);
                        Some(())
                    }
                    "allowMultipleAllocations" if !select.test => {
                        found.push(DeviceReference::AllowMultipleAllocations);
                        Some(())
                    }
                    _ => None,
                };
            }
            if let Some((map, domain)) = domain_of(&select.operand) {
                found.push(reference(map, domain, &select.field));
                return Some(());
            }
            walk(&select.operand, found)
        }
        Expr::Call(call) => {
            if call.func_name == "_[_]"
                && let [operand, key] = call.args.as_slice()
                && let Some((map, domain)) = domain_of(operand)
                && let Some(name) = string_literal(key)
            {
                found.push(reference(map, domain, name));
                return Some(());
            }
            if let Some(target) = &call.target {
                walk(target, found)?;
            }
            call.args.iter().try_for_each(|a| walk(a, found))
        }
        Expr::List(list) => list.elements.iter().try_for_each(|a| walk(a, found)),
        Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => {
                walk(&m.key, found)?;
                walk(&m.value, found)
            }
            EntryExpr::StructField(f) => walk(&f.value, found),
        }),
        Expr::Struct(s) => s.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(m) => {
                walk(&m.key, found)?;
                walk(&m.value, found)
            }
            EntryExpr::StructField(f) => walk(&f.value, found),
        }),
        Expr::Comprehension(c) => {
            let shadows = |v: &str| v == "device";
            if shadows(&c.iter_var) || c.iter_var2.as_deref().is_some_and(shadows) || shadows(&c.accu_var) {
                return None;
            }
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, found)?;
            }
            Some(())
        }
        Expr::Literal(_) | Expr::Unspecified => Some(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(expression: &str) -> Option<Vec<DeviceReference>> {
        let expr = cel::Env::stdlib().parser().parse(expression).unwrap();
        device_references(&expr)
    }

    fn attribute(domain: &str, name: &str) -> DeviceReference {
        DeviceReference::Attribute {
            domain: domain.into(),
            name: name.into(),
        }
    }

    #[test]
    fn constant_paths_are_references() {
        assert_eq!(
            refs(r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#),
            Some(vec![
                attribute("gpu.deckhouse.io", "deviceType"),
                DeviceReference::Driver
            ])
        );
        assert_eq!(
            refs(r#"device.capacity["gpu.deckhouse.io"]["memory"].compareTo(quantity("10Gi")) >= 0"#),
            Some(vec![DeviceReference::Capacity {
                domain: "gpu.deckhouse.io".into(),
                name: "memory".into()
            }])
        );
        assert_eq!(
            refs(r#"has(device.attributes["x.io"].a) && device.allowMultipleAllocations"#),
            Some(vec![DeviceReference::AllowMultipleAllocations, attribute("x.io", "a")])
        );
    }

    #[test]
    fn other_uses_of_device_cannot_be_told() {
        assert_eq!(refs(r#"device.attributes["x.io"].exists(k, k == "a")"#), None);
        assert_eq!(refs(r#"device.attributes[device.driver].a == 1"#), None);
        assert_eq!(refs(r#"[1].all(device, device > 0)"#), None);
        assert_eq!(refs("device == device"), None);
    }
}
