//! The type checker, ported from cel-go's `checker/checker.go`: identifiers, field selection,
//! overload resolution, aggregates and comprehensions, with cel-go's error texts. Like cel-go
//! it rewrites qualified names into identifiers and namespaced calls (`optional.none()`) into
//! global ones, so the cost estimator walks the tree cel-go's estimator walks.

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::declarations::{Declarations, identifier, struct_field};
use super::types::CelType;
use super::unify::Mapping;

/// A problem found by the checker or a validator, at an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Issue {
    pub(crate) id: u64,
    pub(crate) message: String,
}

/// The outcome of checking: final types and resolved overloads by expression id.
pub(crate) struct Checked {
    pub(crate) types: HashMap<u64, CelType>,
    pub(crate) overloads: HashMap<u64, Vec<String>>,
}

pub(crate) struct Checker<'d> {
    pub(super) declarations: &'d Declarations,
    scopes: Vec<HashMap<String, CelType>>,
    pub(super) types: HashMap<u64, CelType>,
    pub(super) overloads: HashMap<u64, Vec<String>>,
    pub(super) mapping: Mapping,
    pub(super) issues: Vec<Issue>,
    free_vars: usize,
}

impl<'d> Checker<'d> {
    pub(crate) fn new(declarations: &'d Declarations) -> Checker<'d> {
        Checker {
            declarations,
            scopes: Vec::new(),
            types: HashMap::new(),
            overloads: HashMap::new(),
            mapping: Mapping::default(),
            issues: Vec::new(),
            free_vars: 0,
        }
    }

    /// Checks `e` (rewriting it in place) and returns the types with parameters bound or `dyn`.
    pub(crate) fn run(mut self, e: &mut IdedExpr) -> Result<Checked, Vec<Issue>> {
        self.check(e);
        if !self.issues.is_empty() {
            return Err(self.issues);
        }
        let types = self
            .types
            .iter()
            .map(|(id, t)| (*id, self.mapping.substitute(t, true)))
            .collect();
        Ok(Checked {
            types,
            overloads: self.overloads,
        })
    }

    pub(super) fn error(&mut self, id: u64, message: String) {
        self.issues.push(Issue { id, message });
    }

    pub(super) fn set_type(&mut self, id: u64, t: CelType) {
        self.types.insert(id, t);
    }

    pub(super) fn type_of(&self, id: u64) -> CelType {
        self.types.get(&id).cloned().unwrap_or(CelType::Error)
    }

    pub(super) fn substituted(&self, id: u64) -> CelType {
        self.mapping.substitute(&self.type_of(id), false)
    }

    /// `c.isAssignable(t1, t2)`: whether `t1` is assignable to `t2`, keeping the bindings.
    pub(super) fn is_assignable(&mut self, t1: &CelType, t2: &CelType) -> bool {
        self.mapping.assign(t2, t1)
    }

    pub(super) fn new_type_var(&mut self) -> CelType {
        let t = CelType::Param(format!("_var{}", self.free_vars));
        self.free_vars += 1;
        t
    }

    pub(super) fn enter_scope(&mut self, variables: Vec<(String, CelType)>) {
        self.scopes.push(variables.into_iter().collect());
    }

    pub(super) fn exit_scope(&mut self) {
        self.scopes.pop();
    }

    fn local(&self, name: &str) -> Option<CelType> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    pub(super) fn check(&mut self, e: &mut IdedExpr) {
        let id = e.id;
        match &mut e.expr {
            Expr::Literal(literal) => {
                let t = match literal {
                    LiteralValue::Boolean(_) => CelType::Bool,
                    LiteralValue::Bytes(_) => CelType::Bytes,
                    LiteralValue::Double(_) => CelType::Double,
                    LiteralValue::Int(_) => CelType::Int,
                    LiteralValue::Null => CelType::Null,
                    LiteralValue::String(_) => CelType::String,
                    LiteralValue::UInt(_) => CelType::Uint,
                };
                self.set_type(id, t);
            }
            Expr::Ident(name) => {
                let name = name.clone();
                self.check_ident(e, &name);
            }
            Expr::Select(_) => self.check_select(e),
            Expr::Call(_) => self.check_call(e),
            Expr::List(_) => self.check_list(e),
            Expr::Map(_) => self.check_map(e),
            Expr::Struct(s) => {
                let message = format!("undeclared reference to '{}' (in container '')", s.type_name);
                self.error(id, message);
                self.set_type(id, CelType::Error);
            }
            Expr::Comprehension(_) => self.check_comprehension(e),
            Expr::Unspecified => {
                self.error(id, "unexpected unspecified type: ".to_owned());
                self.set_type(id, CelType::Error);
            }
        }
    }

    /// `resolveSimpleIdent` and the identifier rewrite.
    fn resolve(&self, name: &str) -> Option<(String, CelType)> {
        if !name.starts_with('.')
            && let Some(t) = self.local(name)
        {
            return Some((name.to_owned(), t));
        }
        let global = name.trim_start_matches('.');
        let t = identifier(global)?;
        let shadowed = self.local(global).is_some();
        Some((
            if shadowed {
                format!(".{global}")
            } else {
                global.to_owned()
            },
            t,
        ))
    }

    fn check_ident(&mut self, e: &mut IdedExpr, name: &str) {
        match self.resolve(name) {
            Some((resolved, t)) => {
                self.set_type(e.id, t);
                e.expr = Expr::Ident(resolved);
            }
            None => {
                self.set_type(e.id, CelType::Error);
                self.error(e.id, format!("undeclared reference to '{name}' (in container '')"));
            }
        }
    }

    fn check_select(&mut self, e: &mut IdedExpr) {
        if let Some(names) = qualifiers(e)
            && let Some(head) = names.first()
        {
            let shadowed = self.local(head).is_some();
            if !shadowed || head.starts_with('.') {
                let joined = names.join(".");
                let global = joined.trim_start_matches('.');
                if let Some(t) = identifier(global) {
                    self.set_type(e.id, t);
                    e.expr = Expr::Ident(if shadowed {
                        format!(".{global}")
                    } else {
                        global.to_owned()
                    });
                    return;
                }
            }
        }
        let Expr::Select(select) = &mut e.expr else {
            unreachable!()
        };
        let (field, test) = (select.field.clone(), select.test);
        let mut result = self.check_select_field(e.id, &mut select.operand, &field, false);
        if test {
            result = CelType::Bool;
        }
        let t = self.mapping.substitute(&result, false);
        self.set_type(e.id, t);
    }

    /// Field selection on `operand`: map values, object fields, or `dyn`.
    pub(super) fn check_select_field(
        &mut self,
        id: u64,
        operand: &mut IdedExpr,
        field: &str,
        optional: bool,
    ) -> CelType {
        self.check(operand);
        let operand_type = self.substituted(operand.id);
        let (target, was_optional) = match operand_type.optional_inner() {
            Some(inner) => (inner.clone(), true),
            None => (operand_type.clone(), false),
        };
        let result = match &target {
            CelType::Map(_, value) => value.as_ref().clone(),
            CelType::Struct(name) => match struct_field(name, field) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    self.error(id, format!("undefined field '{field}'"));
                    CelType::Error
                }
                Err(()) => {
                    self.error(id, format!("unexpected failed resolution of '{name}'"));
                    CelType::Error
                }
            },
            CelType::Param(_) => {
                self.is_assignable(&CelType::Dyn, &target);
                CelType::Dyn
            }
            other => {
                if !other.is_dyn_or_error() {
                    self.error(
                        id,
                        format!("type '{}' does not support field selection", other.format()),
                    );
                }
                CelType::Dyn
            }
        };
        if was_optional || optional {
            CelType::optional(result)
        } else {
            result
        }
    }
}

/// The names of a chain of field selections ending in an identifier, root first (`a.b.c`).
pub(super) fn qualifiers(e: &IdedExpr) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut e = e;
    loop {
        match &e.expr {
            Expr::Select(s) if !s.test => {
                names.push(s.field.clone());
                e = &s.operand;
            }
            Expr::Ident(name) => {
                names.push(name.clone());
                names.reverse();
                return Some(names);
            }
            _ => return None,
        }
    }
}

/// `containers.ToQualifiedName`: the dotted name an identifier or field-selection chain spells.
pub(super) fn qualified_name(e: &IdedExpr) -> Option<String> {
    qualifiers(e).map(|names| names.join("."))
}

/// The map entries of a map literal, mutably (the AST keeps them as generic entries).
pub(super) fn map_entries(
    entries: &mut [cel::common::ast::IdedEntryExpr],
) -> impl Iterator<Item = &mut cel::common::ast::MapEntryExpr> {
    entries.iter_mut().filter_map(|entry| match &mut entry.expr {
        EntryExpr::MapEntry(m) => Some(m),
        EntryExpr::StructField(_) => None,
    })
}
