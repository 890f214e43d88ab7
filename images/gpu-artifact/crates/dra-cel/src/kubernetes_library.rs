//! The Kubernetes CEL libraries a DRA selector may call: `quantity()`/`isQuantity()` with the
//! Quantity member functions, and `semver()`/`isSemver()` with the Semver member functions,
//! registered on a `cel` environment. Names and signatures follow the API server's
//! `k8s.io/apiserver/pkg/cel/library` (quantity.go, semver.go).

use std::sync::Arc;

use cel::common::types::{BOOL_TYPE, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::{Quantity, Semver};

pub(crate) const QUANTITY_TYPE_NAME: &str = "kubernetes.Quantity";
pub(crate) const SEMVER_TYPE_NAME: &str = "kubernetes.Semver";

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY_TYPE_NAME
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER_TYPE_NAME
    }
}

/// A quantity as a CEL value (what `device.capacity[...]` entries hold).
pub(crate) fn quantity_value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(q))
}

/// A semantic version as a CEL value (what `version` attributes hold).
pub(crate) fn semver_value(v: Semver) -> Value {
    Value::Opaque(Arc::new(v))
}

fn out<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(boxed.into())
}

fn opaque<T: Opaque + Clone>(function: &str, arg: &dyn Val) -> Result<T, ExecutionError> {
    match Value::try_from(arg)? {
        Value::Opaque(o) => o
            .downcast_ref::<T>()
            .cloned()
            .ok_or_else(|| ExecutionError::function_error(function, "unexpected argument type")),
        other => Err(ExecutionError::function_error(
            function,
            format!("unexpected argument {other:?}"),
        )),
    }
}

fn string(function: &str, arg: &dyn Val) -> Result<Arc<String>, ExecutionError> {
    match Value::try_from(arg)? {
        Value::String(s) => Ok(s),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a string, got {other:?}"),
        )),
    }
}

fn int(function: &str, arg: &dyn Val) -> Result<i64, ExecutionError> {
    match Value::try_from(arg)? {
        Value::Int(i) => Ok(i),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected an int, got {other:?}"),
        )),
    }
}

fn boolean(function: &str, arg: &dyn Val) -> Result<bool, ExecutionError> {
    match Value::try_from(arg)? {
        Value::Bool(b) => Ok(b),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a bool, got {other:?}"),
        )),
    }
}

/// Argument `i` of a call; the environment declares each function's arity, so a missing one is
/// reported as a function error rather than trusted.
fn arg<'a>(args: &'a [CowVal<'_, '_>], i: usize, function: &str) -> Result<&'a dyn Val, ExecutionError> {
    args.get(i)
        .map(|a| &**a)
        .ok_or_else(|| ExecutionError::function_error(function, format!("missing argument {i}")))
}

fn q<'b, 'v>(args: &[CowVal<'b, 'v>], i: usize, f: &str) -> Result<Quantity, ExecutionError> {
    opaque::<Quantity>(f, arg(args, i, f)?)
}

fn s<'b, 'v>(args: &[CowVal<'b, 'v>], i: usize, f: &str) -> Result<Semver, ExecutionError> {
    opaque::<Semver>(f, arg(args, i, f)?)
}

fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string("quantity", arg(&args, 0, "quantity")?)?;
    let parsed = Quantity::parse(&text).map_err(|e| ExecutionError::function_error("quantity", e))?;
    out(quantity_value(parsed))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(
        Quantity::parse(&string("isQuantity", arg(&args, 0, "isQuantity")?)?).is_ok(),
    ))
}

fn quantity_sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Int(q(&args, 0, "sign")?.sign()))
}

fn quantity_is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(q(&args, 0, "isInteger")?.as_integer().is_some()))
}

fn quantity_as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = q(&args, 0, "asInteger")?;
    let integer = value.as_integer().ok_or_else(|| {
        ExecutionError::function_error("asInteger", format!("cannot convert value {value} to integer"))
    })?;
    out(Value::Int(integer))
}

fn quantity_as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Float(q(&args, 0, "asApproximateFloat")?.as_approximate_float()))
}

fn quantity_add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(quantity_value(q(&args, 0, "add")?.saturating_add(q(&args, 1, "add")?)))
}

fn quantity_add_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(quantity_value(q(&args, 0, "add")?.saturating_add(
        Quantity::from_units(int("add", arg(&args, 1, "add")?)?),
    )))
}

fn quantity_sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(quantity_value(q(&args, 0, "sub")?.saturating_sub(q(&args, 1, "sub")?)))
}

fn quantity_sub_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(quantity_value(q(&args, 0, "sub")?.saturating_sub(
        Quantity::from_units(int("sub", arg(&args, 1, "sub")?)?),
    )))
}

fn quantity_greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(
        q(&args, 0, "isGreaterThan")? > q(&args, 1, "isGreaterThan")?,
    ))
}

fn quantity_less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(q(&args, 0, "isLessThan")? < q(&args, 1, "isLessThan")?))
}

fn quantity_compare<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Int(q(&args, 0, "compareTo")?.compare(&q(
        &args,
        1,
        "compareTo",
    )?)))
}

fn semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string("semver", arg(&args, 0, "semver")?)?;
    let parsed = Semver::parse(&text).map_err(|e| ExecutionError::function_error("semver", e))?;
    out(semver_value(parsed))
}

fn semver_normalize<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string("semver", arg(&args, 0, "semver")?)?;
    let parsed = if boolean("semver", arg(&args, 1, "semver")?)? {
        Semver::parse_normalized(&text)
    } else {
        Semver::parse(&text)
    };
    out(semver_value(
        parsed.map_err(|e| ExecutionError::function_error("semver", e))?,
    ))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(
        Semver::parse(&string("isSemver", arg(&args, 0, "isSemver")?)?).is_ok(),
    ))
}

fn is_semver_normalize<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string("isSemver", arg(&args, 0, "isSemver")?)?;
    let ok = if boolean("isSemver", arg(&args, 1, "isSemver")?)? {
        Semver::parse_normalized(&text).is_ok()
    } else {
        Semver::parse(&text).is_ok()
    };
    out(Value::Bool(ok))
}

fn semver_major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Int(s(&args, 0, "major")?.major() as i64))
}

fn semver_minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Int(s(&args, 0, "minor")?.minor() as i64))
}

fn semver_patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Int(s(&args, 0, "patch")?.patch() as i64))
}

fn semver_greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(
        s(&args, 0, "isGreaterThan")? > s(&args, 1, "isGreaterThan")?,
    ))
}

fn semver_less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    out(Value::Bool(s(&args, 0, "isLessThan")? < s(&args, 1, "isLessThan")?))
}

fn semver_compare<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let ordering = s(&args, 0, "compareTo")?.cmp(&s(&args, 1, "compareTo")?);
    out(Value::Int(ordering as i64))
}

/// Registers the quantity and semver libraries on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let qt = || Type::new_opaque_type(QUANTITY_TYPE_NAME);
    let st = || Type::new_opaque_type(SEMVER_TYPE_NAME);
    env.add_type(qt())?;
    env.add_type(st())?;

    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], quantity)?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], is_quantity)?;
    env.add_member_overload("sign", "quantity_sign", qt(), vec![], quantity_sign)?;
    env.add_member_overload("isInteger", "quantity_is_integer", qt(), vec![], quantity_is_integer)?;
    env.add_member_overload("asInteger", "quantity_as_integer", qt(), vec![], quantity_as_integer)?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_float",
        qt(),
        vec![],
        quantity_as_float,
    )?;
    env.add_member_overload("add", "quantity_add", qt(), vec![qt()], quantity_add)?;
    env.add_member_overload("add", "quantity_add_int", qt(), vec![INT_TYPE], quantity_add_int)?;
    env.add_member_overload("sub", "quantity_sub", qt(), vec![qt()], quantity_sub)?;
    env.add_member_overload("sub", "quantity_sub_int", qt(), vec![INT_TYPE], quantity_sub_int)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        qt(),
        vec![qt()],
        quantity_greater,
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", qt(), vec![qt()], quantity_less)?;
    env.add_member_overload("compareTo", "quantity_compare_to", qt(), vec![qt()], quantity_compare)?;

    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], semver)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        semver_normalize,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        is_semver_normalize,
    )?;
    env.add_member_overload("major", "semver_major", st(), vec![], semver_major)?;
    env.add_member_overload("minor", "semver_minor", st(), vec![], semver_minor)?;
    env.add_member_overload("patch", "semver_patch", st(), vec![], semver_patch)?;
    env.add_member_overload(
        "isGreaterThan",
        "semver_is_greater_than",
        st(),
        vec![st()],
        semver_greater,
    )?;
    env.add_member_overload("isLessThan", "semver_is_less_than", st(), vec![st()], semver_less)?;
    env.add_member_overload("compareTo", "semver_compare_to", st(), vec![st()], semver_compare)?;
    Ok(())
}
