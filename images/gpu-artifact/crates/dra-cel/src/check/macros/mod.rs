//! The macros of the API server's CEL environment, expanded exactly as cel-go expands them
//! (`parser/macro.go`, `ext/comprehensions.go`, `ext/bindings.go`, `cel/library.go` optMap,
//! `ext/lists.go` sortBy), so the checker and the cost estimator see the same comprehensions.
//! Used only by the checking parser: the evaluated program keeps the `cel` crate's own macros.

mod bindings;
mod comprehensions;
mod nodes;

use cel::common::ast::IdedExpr;
use cel::parser::{Macro, MacroExprHelper, ParseError};

use crate::release::KubernetesRelease;
use bindings::{bind, has, opt_map, sort_by};
use comprehensions::{Builder, Quantifier, builder, quantifier};

/// cel-go's hidden accumulator name, and the traditional one it also refuses as a variable.
pub(crate) const ACCUMULATOR: &str = "@result";
pub(crate) const LEGACY_ACCUMULATOR: &str = "__result__";

type Expansion = Result<Option<IdedExpr>, ParseError>;
type Helper<'a, 'b> = &'a mut MacroExprHelper<'b>;

/// The call's `N` arguments, taken for the expansion, or `None` (nothing taken) for another
/// count. The parser expands a macro only for the arity it is registered with, so `None` does not
/// happen; an expander that gets it declines, which leaves the call as written, as cel-go leaves
/// a call that no macro matches.
fn take_args<const N: usize>(args: &mut Vec<IdedExpr>) -> Option<[IdedExpr; N]> {
    if args.len() != N {
        return None;
    }
    std::mem::take(args).try_into().ok()
}

/// The receiver and the `N` arguments of a receiver-style macro call, as [`take_args`].
fn take_receiver<const N: usize>(
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Option<(IdedExpr, [IdedExpr; N])> {
    if target.is_none() || args.len() != N {
        return None;
    }
    Some((target.take()?, take_args(args)?))
}

/// `cel.bind`, which the evaluated program needs too: the `cel` crate does not expand it.
pub(crate) fn bind_macro() -> Macro {
    Macro::receiver("bind", 3, bind)
}

/// The macros of `release`'s environment.
pub(crate) fn macros(release: KubernetesRelease) -> Vec<Macro> {
    let mut all = vec![
        Macro::global("has", 1, has),
        Macro::receiver("all", 2, quantifier(Quantifier::All, false)),
        Macro::receiver("exists", 2, quantifier(Quantifier::Exists, false)),
        Macro::receiver("exists_one", 2, quantifier(Quantifier::ExistsOne, false)),
        Macro::receiver("all", 3, quantifier(Quantifier::All, true)),
        Macro::receiver("exists", 3, quantifier(Quantifier::Exists, true)),
        Macro::receiver("exists_one", 3, quantifier(Quantifier::ExistsOne, true)),
        Macro::receiver("existsOne", 3, quantifier(Quantifier::ExistsOne, true)),
        Macro::receiver("map", 2, builder(Builder::Map)),
        Macro::receiver("map", 3, builder(Builder::Map)),
        Macro::receiver("filter", 2, builder(Builder::Filter)),
        Macro::receiver("transformList", 3, builder(Builder::TransformList)),
        Macro::receiver("transformList", 4, builder(Builder::TransformList)),
        Macro::receiver("transformMap", 3, builder(Builder::TransformMap)),
        Macro::receiver("transformMap", 4, builder(Builder::TransformMap)),
        Macro::receiver("transformMapEntry", 3, builder(Builder::TransformMapEntry)),
        Macro::receiver("transformMapEntry", 4, builder(Builder::TransformMapEntry)),
        bind_macro(),
        Macro::receiver("optMap", 2, opt_map(false)),
        Macro::receiver("optFlatMap", 2, opt_map(true)),
    ];
    if release.has_list_extension() {
        all.push(Macro::receiver("sortBy", 2, sort_by));
    }
    all
}
