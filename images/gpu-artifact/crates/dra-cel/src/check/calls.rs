//! The checker for calls (cel-go `checkCall`, `checkOptSelect`, `resolveOverload`): namespaced
//! functions, receiver calls, optional field selection, and overload resolution with fresh type
//! variables for each overload's type parameters.

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

use super::checker::{Checker, qualified_name};
use super::declarations::Overload;
use super::types::{CelType, Kind};

impl Checker<'_> {
    pub(super) fn check_call(&mut self, e: &mut IdedExpr) {
        let id = e.id;
        let Expr::Call(call) = &mut e.expr else { unreachable!() };
        if call.func_name == "_?._" {
            return self.check_optional_select(id, call);
        }
        for arg in call.args.iter_mut() {
            self.check(arg);
        }
        let declarations = self.declarations;
        let name = call.func_name.clone();
        let Some(target) = call.target.as_mut() else {
            return match declarations.function(name.trim_start_matches('.')) {
                Some(overloads) => self.resolve_overload(id, &name, overloads, None, &call.args),
                None => self.undeclared(id, &name),
            };
        };
        if let Some(prefix) = qualified_name(target) {
            let qualified = format!("{prefix}.{name}");
            if let Some(overloads) = declarations.function(qualified.trim_start_matches('.')) {
                let args = std::mem::take(&mut call.args);
                let resolved = qualified.trim_start_matches('.').to_owned();
                self.resolve_overload(id, &resolved, overloads, None, &args);
                e.expr = Expr::Call(CallExpr {
                    func_name: resolved,
                    target: None,
                    args,
                });
                return;
            }
        }
        self.check(target);
        let target_type = self.type_of(target.id);
        match declarations.function(&name) {
            Some(overloads) => self.resolve_overload(id, &name, overloads, Some(target_type), &call.args),
            None => self.undeclared(id, &name),
        }
    }

    fn undeclared(&mut self, id: u64, name: &str) {
        self.set_type(id, CelType::Error);
        self.error(id, format!("undeclared reference to '{name}' (in container '')"));
    }

    fn check_optional_select(&mut self, id: u64, call: &mut CallExpr) {
        let count = call.args.len();
        let (None, [operand, field]) = (&call.target, call.args.as_mut_slice()) else {
            let member = if call.target.is_some() { " member call with" } else { "" };
            let message =
                format!("unsupported optional field selection: incorrect signature.{member} argument count: {count}");
            return self.error(id, message);
        };
        let field = match &field.expr {
            Expr::Literal(LiteralValue::String(s)) => s.inner().to_owned(),
            _ => return self.error(field.id, "unsupported optional field selection".to_owned()),
        };
        let result = self.check_select_field(id, operand, &field, true);
        let t = self.mapping.substitute(&result, false);
        self.set_type(id, t);
        self.overloads.insert(id, vec!["select_optional_field".to_owned()]);
    }

    /// `resolveOverload`: the overloads whose argument types match, and the result type.
    fn resolve_overload(
        &mut self,
        id: u64,
        name: &str,
        overloads: &[Overload],
        target: Option<CelType>,
        args: &[IdedExpr],
    ) {
        let arg_types: Vec<CelType> = target
            .iter()
            .cloned()
            .chain(args.iter().map(|a| self.type_of(a.id)))
            .collect();
        let mut result: Option<CelType> = None;
        let mut matched = Vec::new();
        for overload in overloads {
            if target.is_some() != overload.member {
                continue;
            }
            if name == "_&&_" || name == "_||_" {
                let mut failed = false;
                for (t, arg) in arg_types.iter().zip(args) {
                    if !self.is_assignable(t, &CelType::Bool) {
                        self.error(arg.id, format!("expected type 'bool' but found '{}'", t.format()));
                        failed = true;
                    }
                }
                if failed {
                    return self.set_type(id, CelType::Error);
                }
                self.overloads.insert(id, vec![overload.id.clone()]);
                return self.set_type(id, CelType::Bool);
            }
            let fresh: Vec<(String, CelType)> = overload
                .params
                .iter()
                .map(|p| (p.clone(), self.new_type_var()))
                .collect();
            let instantiate = |t: &CelType| replace_params(t, &fresh);
            let candidates: Vec<CelType> = overload.args.iter().map(instantiate).collect();
            if self.mapping.assign_all(&arg_types, &candidates) {
                matched.push(overload.id.clone());
                let fn_result = self.mapping.substitute(&instantiate(&overload.result), false);
                result = Some(match result {
                    None => fn_result,
                    Some(r) if !r.is_dyn() && fn_result != r => CelType::Dyn,
                    Some(r) => r,
                });
            }
        }
        match result {
            Some(t) => {
                self.overloads.insert(id, matched);
                self.set_type(id, t);
            }
            None => {
                let shown: Vec<String> = arg_types
                    .iter()
                    .map(|t| self.mapping.substitute(t, true).format())
                    .collect();
                let signature = match (target, shown.split_first()) {
                    (Some(_), Some((receiver, rest))) => format!("{receiver}.({})", rest.join(", ")),
                    _ => format!("({})", shown.join(", ")),
                };
                self.error(
                    id,
                    format!("found no matching overload for '{name}' applied to '{signature}'"),
                );
                self.set_type(id, CelType::Error);
            }
        }
    }
}

/// `t` with the overload's declared type parameters replaced by fresh type variables.
fn replace_params(t: &CelType, fresh: &[(String, CelType)]) -> CelType {
    match t {
        CelType::Param(name) => fresh
            .iter()
            .find(|(p, _)| p == name)
            .map_or_else(|| t.clone(), |(_, v)| v.clone()),
        _ if t.kind() == Kind::Param || t.parameters().is_empty() => t.clone(),
        _ => t.with_parameters(t.parameters().into_iter().map(|p| replace_params(p, fresh)).collect()),
    }
}
