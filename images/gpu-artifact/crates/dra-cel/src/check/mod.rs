//! Compile-time checking of a selector as the API server's DRA compiler does it: parse with the
//! environment's macros, type-check against its declarations, run its AST validators, and
//! require a result of type bool or the attribute type. Messages are cel-go's.

mod aggregates;
mod calls;
mod checker;
mod constants;
mod declarations;
mod format_validator;
mod literals;
mod macros;
mod re2;
mod types;
mod unify;
mod validators;

use cel::common::ast::{IdedExpr, SourceInfo};

pub(crate) use checker::Checked;
use checker::{Checker, Issue};
pub use declarations::{DeclaredOverload, declared_overloads};
pub(crate) use macros::{ACCUMULATOR, LEGACY_ACCUMULATOR, bind_macro};
pub(crate) use types::{CelType, Kind};

use crate::release::KubernetesRelease;

/// `MaxRecursionDepth` of cel-go's parser.
pub(crate) const MAX_RECURSION_DEPTH: u16 = 250;

/// A selector that passed the checks: the tree as the checker rewrote it, and what it found.
pub(crate) struct CheckedSelector {
    pub(crate) expr: IdedExpr,
    pub(crate) checked: Checked,
}

/// Checks `expression` in `release`'s environment; the error is the message cel-go would give.
pub(crate) fn check(expression: &str, release: KubernetesRelease) -> Result<CheckedSelector, String> {
    let mut env = cel::Env::default();
    for m in macros::macros(release) {
        env.add_macro(m).map_err(|e| format!("compilation failed: {e}"))?;
    }
    let (mut expr, source) = env
        .parser()
        .max_recursion_depth(MAX_RECURSION_DEPTH)
        .enable_ident_escape_syntax(release.has_identifier_escapes())
        .parse_with_source_info(expression)
        .map_err(|e| format!("compilation failed: {}", e.to_string().replace("\n| ", "\n | ")))?;
    let checked = Checker::new(declarations::declarations(release))
        .run(&mut expr)
        .map_err(|issues| failed(issues, &source))?;
    let issues = validators::validate(&expr, &checked);
    if !issues.is_empty() {
        return Err(failed(issues, &source));
    }
    let result = checked.types.get(&expr.id).cloned().unwrap_or(CelType::Dyn);
    if !matches!(result, CelType::Bool | CelType::Any) {
        return Err(format!("must evaluate to bool or the unknown type, not {result}"));
    }
    constants::plan(&expr, &checked)?;
    Ok(CheckedSelector { expr, checked })
}

/// cel-go's rendering of issues: `ERROR: <input>:line:column: message`, the source line and a
/// caret under the column, ordered by position.
fn failed(mut issues: Vec<Issue>, source: &SourceInfo) -> String {
    let position = |id: u64| source.offset_for(id).map_or(0, |(start, _)| start as usize);
    issues.sort_by_key(|issue| position(issue.id));
    let rendered: Vec<String> = issues
        .iter()
        .map(|issue| {
            let offset = position(issue.id).min(source.source.len());
            let before = source.source.get(..offset).unwrap_or("");
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let line = before.matches('\n').count() + 1;
            let column = before[line_start..].chars().count();
            let text = source.source[line_start..].lines().next().unwrap_or("");
            format!(
                "ERROR: <input>:{line}:{}: {}\n | {text}\n | {}^",
                column + 1,
                issue.message,
                ".".repeat(column)
            )
        })
        .collect();
    format!("compilation failed: {}", rendered.join("\n"))
}
