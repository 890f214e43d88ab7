//! What cel-go's program planner does at compile time with `OptOptimize`, which the Kubernetes
//! environment enables: it folds literal lists and maps and type conversions of constants,
//! failing the program when a conversion fails (`uint(-1)`, `double("x")`), and compiles
//! constant regular expressions of `matches`, `find` and `findAll`, failing on a bad one.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::checker::Checked;
use super::declarations::identifier;
use super::literals::{format_timestamp, parse_duration, parse_timestamp, valid_timestamp_seconds};
use super::types::Kind;

/// A folded constant, as far as later folding needs to know it.
#[derive(Clone, Debug)]
enum Constant {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    /// Nanoseconds.
    Duration(i64),
    /// Seconds since the epoch.
    Timestamp(i64),
    /// Any other constant (null, lists, maps, types).
    Other,
    EmptyList,
}

/// The first error the planner would report for `e`, if any.
pub(crate) fn plan(e: &IdedExpr, checked: &Checked) -> Result<(), String> {
    fold(e, checked).map(|_| ())
}

fn fold(e: &IdedExpr, checked: &Checked) -> Result<Option<Constant>, String> {
    Ok(match &e.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(b) => Constant::Bool(*b.inner()),
            LiteralValue::Int(i) => Constant::Int(*i.inner()),
            LiteralValue::UInt(u) => Constant::Uint(*u.inner()),
            LiteralValue::Double(d) => Constant::Double(*d.inner()),
            LiteralValue::String(s) => Constant::String(s.inner().to_owned()),
            LiteralValue::Bytes(b) => Constant::Bytes(b.inner().to_vec()),
            LiteralValue::Null => Constant::Other,
        }),
        Expr::List(list) => {
            let mut all = list.optional_indices.is_empty();
            for element in &list.elements {
                all &= fold(element, checked)?.is_some();
            }
            all.then_some(if list.elements.is_empty() {
                Constant::EmptyList
            } else {
                Constant::Other
            })
        }
        Expr::Map(map) => {
            let mut all = true;
            for entry in &map.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(m) => {
                        all &= !m.optional;
                        all &= fold(&m.key, checked)?.is_some();
                        all &= fold(&m.value, checked)?.is_some();
                    }
                    EntryExpr::StructField(f) => all &= fold(&f.value, checked)?.is_some(),
                }
            }
            all.then_some(Constant::Other)
        }
        Expr::Call(call) => {
            let mut args = Vec::new();
            for arg in call.target.iter().map(|t| t.as_ref()).chain(&call.args) {
                args.push(fold(arg, checked)?);
            }
            let overloads = checked.overloads.get(&e.id).map(Vec::as_slice).unwrap_or_default();
            if matches!(call.func_name.as_str(), "matches" | "find" | "findAll")
                && let Some(Some(Constant::String(pattern))) = args.get(1)
                && let Err(error) = super::re2::validate(pattern)
            {
                return Err(format!(
                    "program instantiation failed: error parsing regexp: {error}: `{pattern}`"
                ));
            }
            if let ("_[_]" | "_[?_]", [_, Some(key)]) = (call.func_name.as_str(), &args[..]) {
                check_qualifier(key)?;
            }
            match (call.func_name.as_str(), &args[..]) {
                ("@in", [_, Some(Constant::EmptyList)]) if overloads.iter().any(|o| o == "in_list") => {
                    Some(Constant::Bool(false))
                }
                (function, [Some(value)]) if call.target.is_none() => convert(function, value)?,
                _ => None,
            }
        }
        Expr::Select(s) => {
            fold(&s.operand, checked)?;
            None
        }
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                fold(part, checked)?;
            }
            None
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    fold(&f.value, checked)?;
                }
            }
            None
        }
        Expr::Ident(name) => {
            // Identifiers typed as types are planned as type names, which locals are not.
            let is_type = checked.types.get(&e.id).is_some_and(|t| t.kind() == Kind::Type);
            match is_type {
                true if identifier(name.trim_start_matches('.')).is_none() => {
                    return Err(format!(
                        "program instantiation failed: reference to undefined type: {name}"
                    ));
                }
                true => Some(Constant::Other),
                false => None,
            }
        }
        Expr::Unspecified => None,
    })
}

/// A constant index must be a string, number or bool to become an attribute qualifier.
fn check_qualifier(key: &Constant) -> Result<(), String> {
    match key {
        Constant::String(_) | Constant::Int(_) | Constant::Uint(_) | Constant::Bool(_) | Constant::Double(_) => Ok(()),
        _ => Err(format!("program instantiation failed: invalid qualifier type: {key:?}")),
    }
}

fn conversion_error(from: &str, to: &str) -> String {
    format!("program instantiation failed: type conversion error from '{from}' to '{to}'")
}

const INT_OVERFLOW: &str = "program instantiation failed: integer overflow";
const UINT_OVERFLOW: &str = "program instantiation failed: unsigned integer overflow";

/// The type conversion `function(value)`, `Ok(None)` when `function` is no conversion.
fn convert(function: &str, value: &Constant) -> Result<Option<Constant>, String> {
    use Constant as C;
    let converted = match (function, value) {
        ("dyn", value) => value.clone(),
        ("type", _) => C::Other,
        ("bool", C::Bool(b)) => C::Bool(*b),
        ("bool", C::String(s)) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => C::Bool(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => C::Bool(false),
            _ => return Err(conversion_error("string", "bool")),
        },
        ("bytes", C::String(s)) => C::Bytes(s.clone().into_bytes()),
        ("bytes", C::Bytes(b)) => C::Bytes(b.clone()),
        ("double", C::Double(d)) => C::Double(*d),
        ("double", C::Int(i)) => C::Double(*i as f64),
        ("double", C::Uint(u)) => C::Double(*u as f64),
        ("double", C::String(s)) => C::Double(s.parse().map_err(|_| conversion_error("string", "double"))?),
        ("int", C::Int(i)) => C::Int(*i),
        ("int", C::Duration(nanos)) => C::Int(*nanos),
        ("int", C::Timestamp(seconds)) => C::Int(*seconds),
        ("int", C::Uint(u)) => C::Int(i64::try_from(*u).map_err(|_| INT_OVERFLOW.to_owned())?),
        ("int", C::Double(d)) => {
            if d.is_nan() || *d <= i64::MIN as f64 || *d >= i64::MAX as f64 {
                return Err(INT_OVERFLOW.to_owned());
            }
            C::Int(*d as i64)
        }
        ("int", C::String(s)) => C::Int(s.parse().map_err(|_| conversion_error("string", "int"))?),
        ("uint", C::Uint(u)) => C::Uint(*u),
        ("uint", C::Int(i)) => C::Uint(u64::try_from(*i).map_err(|_| UINT_OVERFLOW.to_owned())?),
        ("uint", C::Double(d)) => {
            if d.is_nan() || *d < 0.0 || *d >= u64::MAX as f64 {
                return Err(UINT_OVERFLOW.to_owned());
            }
            C::Uint(*d as u64)
        }
        ("uint", C::String(s)) if !s.starts_with('+') => {
            C::Uint(s.parse().map_err(|_| conversion_error("string", "uint"))?)
        }
        ("uint", C::String(_)) => return Err(conversion_error("string", "uint")),
        ("string", C::Bytes(b)) => {
            C::String(String::from_utf8(b.clone()).map_err(|_| conversion_error("bytes", "string"))?)
        }
        ("string", C::Bool(b)) => C::String(b.to_string()),
        ("string", C::Int(i)) => C::String(i.to_string()),
        ("string", C::Uint(u)) => C::String(u.to_string()),
        ("string", C::Double(d)) => C::String(d.to_string()),
        ("string", C::String(s)) => C::String(s.clone()),
        ("string", C::Duration(nanos)) => C::String(format!("{}s", *nanos as f64 / 1e9)),
        ("string", C::Timestamp(seconds)) => C::String(format_timestamp(*seconds)),
        ("duration", C::Duration(nanos)) => C::Duration(*nanos),
        ("duration", C::String(s)) => {
            C::Duration(parse_duration(s).ok_or_else(|| conversion_error("string", "google.protobuf.Duration"))?)
        }
        // cel-go 0.26 declares duration(int) but cannot evaluate it.
        ("duration", C::Int(_)) => return Err(conversion_error("int", "google.protobuf.Duration")),
        ("timestamp", C::Timestamp(seconds)) => C::Timestamp(*seconds),
        ("timestamp", C::String(s)) => {
            C::Timestamp(parse_timestamp(s).ok_or_else(|| conversion_error("string", "google.protobuf.Timestamp"))?)
        }
        ("timestamp", C::Int(i)) if !valid_timestamp_seconds(*i) => {
            return Err("program instantiation failed: timestamp overflow".to_owned());
        }
        ("timestamp", C::Int(i)) => C::Timestamp(*i),
        ("bool" | "bytes" | "double" | "int" | "uint" | "string" | "duration" | "timestamp", value) => {
            return Err(format!(
                "program instantiation failed: no such overload: {function}({value:?})"
            ));
        }
        _ => return Ok(None),
    };
    Ok(Some(converted))
}
