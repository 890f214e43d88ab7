//! The binding macros: `has`, `cel.bind`, `optMap`/`optFlatMap` of the optional library and
//! `sortBy` of the list extension (cel-go `ext/bindings.go`, `cel/library.go`, `ext/lists.go`).

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue};

use super::comprehensions::{Builder, builder};
use super::nodes::{call, comprehension, copy, ident, list, literal, simple_name};
use super::{Expansion, Helper, take_args, take_receiver};

pub(super) fn has(h: Helper, _: &mut Option<IdedExpr>, args: &mut Vec<IdedExpr>) -> Expansion {
    let Some([arg]) = take_args(args) else { return Ok(None) };
    match arg.expr {
        Expr::Select(mut select) => {
            select.test = true;
            Ok(Some(h.next_expr(Expr::Select(select))))
        }
        _ => Err(h.new_error(arg.id, "invalid argument to has() macro")),
    }
}

/// `cel.bind(var, init, result)`: a comprehension over an empty list whose accumulator is `var`.
pub(super) fn bind(h: Helper, target: &mut Option<IdedExpr>, args: &mut Vec<IdedExpr>) -> Expansion {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let Some([name, init, result]) = take_args(args) else {
        return Ok(None);
    };
    let var = simple_name(h, &name, "cel.bind() variable names must be simple identifiers")?;
    let (range, cond, step) = empty_range_loop(h, &var);
    Ok(Some(comprehension(
        h,
        ComprehensionExpr {
            iter_range: range,
            iter_var: "#unused".to_owned(),
            iter_var2: None,
            accu_var: var.clone(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        },
    )))
}

fn empty_range_loop(h: Helper, var: &str) -> (IdedExpr, IdedExpr, IdedExpr) {
    let range = list(h, vec![]);
    let cond = literal(h, LiteralValue::Boolean(false.into()));
    (range, cond, ident(h, var))
}

/// `opt.optMap(v, expr)` and `opt.optFlatMap(v, expr)`.
pub(super) fn opt_map(flat: bool) -> impl Fn(Helper, &mut Option<IdedExpr>, &mut Vec<IdedExpr>) -> Expansion {
    move |h, target, args| {
        let which = if flat { "optFlatMap" } else { "optMap" };
        let Some((target, [name, body])) = take_receiver(target, args) else {
            return Ok(None);
        };
        let var = simple_name(
            h,
            &name,
            &format!("{which}() variable name must be a simple identifier"),
        )?;
        let value_of = copy(h, &target);
        let has_value = call(h, "hasValue", Some(target), vec![]);
        let value = call(h, "value", Some(value_of), vec![]);
        let (range, cond, step) = empty_range_loop(h, &var);
        let mut mapped = comprehension(
            h,
            ComprehensionExpr {
                iter_range: range,
                iter_var: "#unused".to_owned(),
                iter_var2: None,
                accu_var: var.clone(),
                accu_init: value,
                loop_cond: cond,
                loop_step: step,
                result: body,
            },
        );
        if !flat {
            mapped = call(h, "optional.of", None, vec![mapped]);
        }
        let none = call(h, "optional.none", None, vec![]);
        Ok(Some(call(h, "_?_:_", None, vec![has_value, mapped, none])))
    }
}

/// `list.sortBy(v, key)` of the list extension.
pub(super) fn sort_by(h: Helper, target: &mut Option<IdedExpr>, args: &mut Vec<IdedExpr>) -> Expansion {
    const INPUT: &str = "@__sortBy_input__";
    if args.len() != 2 {
        return Ok(None);
    }
    let Some(range) = target.take() else { return Ok(None) };
    if !matches!(
        range.expr,
        Expr::List(_) | Expr::Select(_) | Expr::Ident(_) | Expr::Comprehension(_) | Expr::Call(_)
    ) {
        return Err(h.new_error(
            range.id,
            "sortBy can only be applied to a list, identifier, comprehension, call or select expression",
        ));
    }
    let mut map_target = Some(ident(h, INPUT));
    // `map` with the two arguments checked above always expands.
    let Some(keys) = builder(Builder::Map)(h, &mut map_target, args)? else {
        return Err(h.new_error(range.id, "sortBy() takes a variable and a key expression"));
    };
    let input = ident(h, INPUT);
    let sorted = call(h, "@sortByAssociatedKeys", Some(input), vec![keys]);
    let (empty, cond, step) = empty_range_loop(h, INPUT);
    Ok(Some(comprehension(
        h,
        ComprehensionExpr {
            iter_range: empty,
            iter_var: "#unused".to_owned(),
            iter_var2: None,
            accu_var: INPUT.to_owned(),
            accu_init: range,
            loop_cond: cond,
            loop_step: step,
            result: sorted,
        },
    )))
}
