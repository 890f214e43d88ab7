//! The comprehension macros: `all`, `exists`, `exists_one` and their two-variable forms, and the
//! list and map builders `map`, `filter`, `transformList`, `transformMap`, `transformMapEntry`
//! (cel-go `parser/macro.go` and `ext/comprehensions.go`).

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue, MapExpr};

use super::nodes::{call, comprehension, ident, iteration_variable, list, literal, two_variables};
use super::{ACCUMULATOR, Expansion, Helper, take_receiver};

#[derive(Clone, Copy)]
pub(super) enum Quantifier {
    All,
    Exists,
    ExistsOne,
}

pub(super) fn quantifier(
    kind: Quantifier,
    two: bool,
) -> impl Fn(Helper, &mut Option<IdedExpr>, &mut Vec<IdedExpr>) -> Expansion {
    move |h, target, args| {
        let (range, (var, var2), predicate) = if two {
            let Some((range, [first, second, predicate])) = take_receiver(target, args) else {
                return Ok(None);
            };
            (range, two_variables(h, &first, &second)?, predicate)
        } else {
            let Some((range, [first, predicate])) = take_receiver(target, args) else {
                return Ok(None);
            };
            let var = iteration_variable(h, &first, "argument must be a simple name")?;
            (range, (var, None), predicate)
        };
        let accu = || Expr::Ident(ACCUMULATOR.to_owned());
        let (init, cond, step, result) = match kind {
            Quantifier::All => {
                let init = literal(h, LiteralValue::Boolean(true.into()));
                let a = h.next_expr(accu());
                let cond = call(h, "@not_strictly_false", None, vec![a]);
                let a = h.next_expr(accu());
                (
                    init,
                    cond,
                    call(h, "_&&_", None, vec![a, predicate]),
                    h.next_expr(accu()),
                )
            }
            Quantifier::Exists => {
                let init = literal(h, LiteralValue::Boolean(false.into()));
                let a = h.next_expr(accu());
                let not = call(h, "!_", None, vec![a]);
                let cond = call(h, "@not_strictly_false", None, vec![not]);
                let a = h.next_expr(accu());
                (
                    init,
                    cond,
                    call(h, "_||_", None, vec![a, predicate]),
                    h.next_expr(accu()),
                )
            }
            Quantifier::ExistsOne => {
                let init = literal(h, LiteralValue::Int(0.into()));
                let cond = literal(h, LiteralValue::Boolean(true.into()));
                let (a, one) = (h.next_expr(accu()), literal(h, LiteralValue::Int(1.into())));
                let add = call(h, "_+_", None, vec![a, one]);
                let a = h.next_expr(accu());
                let step = call(h, "_?_:_", None, vec![predicate, add, a]);
                let (a, one) = (h.next_expr(accu()), literal(h, LiteralValue::Int(1.into())));
                (init, cond, step, call(h, "_==_", None, vec![a, one]))
            }
        };
        Ok(Some(comprehension(
            h,
            ComprehensionExpr {
                iter_range: range,
                iter_var: var,
                iter_var2: var2,
                accu_var: ACCUMULATOR.to_owned(),
                accu_init: init,
                loop_cond: cond,
                loop_step: step,
                result,
            },
        )))
    }
}

/// `map`, `filter`, `transformList`, `transformMap` and `transformMapEntry`: comprehensions that
/// build a list or a map, with an optional filter.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Builder {
    Map,
    Filter,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

pub(super) fn builder(kind: Builder) -> impl Fn(Helper, &mut Option<IdedExpr>, &mut Vec<IdedExpr>) -> Expansion {
    move |h, target, args| {
        let two = !matches!(kind, Builder::Map | Builder::Filter);
        let variables = if two { 2 } else { 1 };
        // The variables, then the transform (none for `filter`) after an optional filter; any
        // other shape is declined (see `take_args`).
        let bodies = args.len().checked_sub(variables);
        let arity = match kind {
            Builder::Filter => bodies == Some(1),
            _ => matches!(bodies, Some(1 | 2)),
        };
        if !arity || target.is_none() {
            return Ok(None);
        }
        let (var, var2) = match args.as_slice() {
            [first, second, ..] if two => two_variables(h, first, second)?,
            [first, ..] => (iteration_variable(h, first, "argument is not an identifier")?, None),
            [] => return Ok(None),
        };
        let mut body = args.split_off(variables);
        let transform = match kind {
            Builder::Filter => Some(ident(h, &var)),
            _ => body.pop(),
        };
        let (Some(transform), Some(range)) = (transform, target.take()) else {
            return Ok(None);
        };
        let filter = body.pop();
        let accu = h.next_expr(Expr::Ident(ACCUMULATOR.to_owned()));
        let mut step = match kind {
            Builder::TransformMap => {
                let key = ident(h, &var);
                call(h, "cel.@mapInsert", None, vec![accu, key, transform])
            }
            Builder::TransformMapEntry => call(h, "cel.@mapInsert", None, vec![accu, transform]),
            _ => {
                let item = list(h, vec![transform]);
                call(h, "_+_", None, vec![accu, item])
            }
        };
        if let Some(filter) = filter {
            let accu = h.next_expr(Expr::Ident(ACCUMULATOR.to_owned()));
            step = call(h, "_?_:_", None, vec![filter, step, accu]);
        }
        let init = match kind {
            Builder::TransformMap | Builder::TransformMapEntry => h.next_expr(Expr::Map(MapExpr { entries: vec![] })),
            _ => list(h, vec![]),
        };
        let cond = literal(h, LiteralValue::Boolean(true.into()));
        let result = h.next_expr(Expr::Ident(ACCUMULATOR.to_owned()));
        Ok(Some(comprehension(
            h,
            ComprehensionExpr {
                iter_range: range,
                iter_var: var,
                iter_var2: var2,
                accu_var: ACCUMULATOR.to_owned(),
                accu_init: init,
                loop_cond: cond,
                loop_step: step,
                result,
            },
        )))
    }
}
