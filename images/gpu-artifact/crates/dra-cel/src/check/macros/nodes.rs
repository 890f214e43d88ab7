//! Building blocks of the macro expansions: new nodes with fresh ids, deep copies, and the
//! checks cel-go makes of comprehension variable names.

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr};
use cel::parser::ParseError;

use super::{ACCUMULATOR, Helper, LEGACY_ACCUMULATOR};

pub(super) fn call(h: Helper, function: &str, target: Option<IdedExpr>, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: function.to_owned(),
        target: target.map(Box::new),
        args,
    }))
}

pub(super) fn ident(h: Helper, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

pub(super) fn literal(h: Helper, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

pub(super) fn list(h: Helper, elements: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::List(ListExpr::new(elements)))
}

/// A comprehension node (cel-go `NewComprehension` and `NewComprehensionTwoVar`).
pub(super) fn comprehension(h: Helper, c: ComprehensionExpr) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(c)))
}

/// A deep copy of `e` with fresh ids (cel-go's `Copy`).
pub(super) fn copy(h: Helper, e: &IdedExpr) -> IdedExpr {
    let expr = match &e.expr {
        Expr::Call(c) => Expr::Call(CallExpr {
            func_name: c.func_name.clone(),
            target: c.target.as_ref().map(|t| Box::new(copy(h, t))),
            args: c.args.iter().map(|a| copy(h, a)).collect(),
        }),
        Expr::Select(s) => {
            let mut s = s.clone();
            s.operand = Box::new(copy(h, &s.operand));
            Expr::Select(s)
        }
        Expr::List(l) => Expr::List(ListExpr::new_with_optionals(
            l.elements.iter().map(|x| copy(h, x)).collect(),
            l.optional_indices.clone(),
        )),
        Expr::Map(m) => Expr::Map(MapExpr {
            entries: m
                .entries
                .iter()
                .map(|entry| {
                    let mut entry = entry.clone();
                    if let EntryExpr::MapEntry(me) = &mut entry.expr {
                        me.key = copy(h, &me.key);
                        me.value = copy(h, &me.value);
                    }
                    entry
                })
                .collect(),
        }),
        Expr::Comprehension(c) => {
            let mut c = c.as_ref().clone();
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                *part = copy(h, part);
            }
            Expr::Comprehension(Box::new(c))
        }
        other => other.clone(),
    };
    h.next_expr(expr)
}

pub(super) fn simple_name(h: Helper, e: &IdedExpr, message: &str) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, message)),
    }
}

pub(super) fn iteration_variable(h: Helper, e: &IdedExpr, message: &str) -> Result<String, ParseError> {
    let name = simple_name(h, e, message)?;
    if name == ACCUMULATOR || name == LEGACY_ACCUMULATOR {
        return Err(h.new_error(e.id, "iteration variable overwrites accumulator variable"));
    }
    Ok(name)
}

pub(super) fn two_variables(
    h: Helper,
    first: &IdedExpr,
    second: &IdedExpr,
) -> Result<(String, Option<String>), ParseError> {
    let var = simple_name(h, first, "argument must be a simple name")?;
    let var2 = simple_name(h, second, "argument must be a simple name")?;
    if var == var2 {
        return Err(h.new_error(second.id, format!("duplicate variable name: {var}")));
    }
    for (name, e) in [(&var, first), (&var2, second)] {
        if name == ACCUMULATOR || name == LEGACY_ACCUMULATOR {
            return Err(h.new_error(e.id, "iteration variable overwrites accumulator variable"));
        }
    }
    Ok((var, Some(var2)))
}
