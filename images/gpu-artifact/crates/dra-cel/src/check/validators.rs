//! The AST validators of the Kubernetes base environment, run after a successful check as cel-go
//! runs them (`cel/validator.go`): duration, timestamp and regex literals must be valid, and list
//! and map literals homogeneous (except inside `format` calls).

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::checker::{Checked, Issue};
use super::format_validator::validate_format_call;
use super::literals::{valid_duration, valid_timestamp_seconds, valid_timestamp_text};
use super::types::CelType;

/// Every issue the validators find in `e`.
pub(crate) fn validate(e: &IdedExpr, checked: &Checked) -> Vec<Issue> {
    let mut issues = Vec::new();
    walk(e, checked, false, &mut issues);
    issues
}

fn walk(e: &IdedExpr, checked: &Checked, in_format: bool, issues: &mut Vec<Issue>) {
    let type_of = |e: &IdedExpr| checked.types.get(&e.id).cloned().unwrap_or(CelType::Dyn);
    match &e.expr {
        Expr::Call(call) => {
            if let Some(first) = call.args.first() {
                literal_argument(&call.func_name, first, issues);
            }
            if call.target.is_some() && call.func_name == "format" {
                validate_format_call(e, call, checked, issues);
            }
            let in_format = in_format || call.func_name == "format";
            for child in call.target.iter().map(|t| t.as_ref()).chain(&call.args) {
                walk(child, checked, in_format, issues);
            }
        }
        Expr::List(list) => {
            if !in_format {
                let mut first: Option<CelType> = None;
                for (i, element) in list.elements.iter().enumerate() {
                    let mut t = type_of(element);
                    if list.optional_indices.contains(&i) {
                        let Some(inner) = t.optional_inner().cloned() else {
                            issues.push(not_optional(element.id, &t));
                            break;
                        };
                        t = inner;
                    }
                    match &first {
                        None => first = Some(t),
                        Some(expected) if !expected.is_equivalent(&t) => {
                            issues.push(mismatch(element.id, expected, &t));
                            break;
                        }
                        Some(_) => {}
                    }
                }
            }
            for element in &list.elements {
                walk(element, checked, in_format, issues);
            }
        }
        Expr::Map(map) => {
            let mut first: Option<(CelType, CelType)> = None;
            for entry in &map.entries {
                let EntryExpr::MapEntry(m) = &entry.expr else { continue };
                let key = type_of(&m.key);
                let mut value = type_of(&m.value);
                if in_format {
                    continue;
                }
                if m.optional {
                    let Some(inner) = value.optional_inner().cloned() else {
                        issues.push(not_optional(m.value.id, &value));
                        break;
                    };
                    value = inner;
                }
                match &first {
                    None => first = Some((key, value)),
                    Some((k, v)) => {
                        if !k.is_equivalent(&key) {
                            issues.push(mismatch(m.key.id, k, &key));
                        }
                        if !v.is_equivalent(&value) {
                            issues.push(mismatch(m.value.id, v, &value));
                        }
                    }
                }
            }
            for entry in &map.entries {
                if let EntryExpr::MapEntry(m) = &entry.expr {
                    walk(&m.key, checked, in_format, issues);
                    walk(&m.value, checked, in_format, issues);
                }
            }
        }
        Expr::Select(s) => walk(&s.operand, checked, in_format, issues),
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, checked, in_format, issues);
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, checked, in_format, issues);
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// cel-go's validator panics on an optional element whose type is not optional (only `dyn`
/// passes the checker), which fails the API server's request.
fn not_optional(id: u64, t: &CelType) -> Issue {
    Issue {
        id,
        message: format!("optional element of type '{}' is not an optional value", t.format()),
    }
}

fn mismatch(id: u64, expected: &CelType, actual: &CelType) -> Issue {
    Issue {
        id,
        message: format!("expected type '{}' but found '{}'", expected.format(), actual.format()),
    }
}

/// The first argument of `duration`, `timestamp` and `matches`, when a literal, must convert.
fn literal_argument(function: &str, arg: &IdedExpr, issues: &mut Vec<Issue>) {
    let Expr::Literal(literal) = &arg.expr else { return };
    let valid = match (function, literal) {
        ("duration", LiteralValue::String(s)) => valid_duration(s.inner()),
        // cel-go 0.26 declares duration(int) but cannot evaluate it.
        ("duration", LiteralValue::Int(_)) => false,
        ("timestamp", LiteralValue::String(s)) => valid_timestamp_text(s.inner()),
        ("timestamp", LiteralValue::Int(i)) => valid_timestamp_seconds(*i.inner()),
        ("matches", LiteralValue::String(s)) => super::re2::validate(s.inner()).is_ok(),
        _ => true,
    };
    if !valid {
        issues.push(Issue {
            id: arg.id,
            message: format!("invalid {function} argument"),
        });
    }
}
