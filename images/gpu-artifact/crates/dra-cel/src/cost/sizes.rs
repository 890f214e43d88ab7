//! Sizes of expressions as cel-go's estimator derives them (`computeSize`, `computeExprSize`,
//! `computeTypeSize`, entry sizes and the sizes of comprehension variables).

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::device::estimate_size;
use super::estimate::Size;
use super::path::GoPath;
use super::{Coster, EntrySize, LocalVar, Node};
use crate::check::{ACCUMULATOR, CelType, Kind, LEGACY_ACCUMULATOR};

/// The size of a literal, list or map literal, known from the expression itself.
fn expression_size(e: &IdedExpr) -> Option<Size> {
    let n = match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => s.inner().chars().count() as u64,
        Expr::Literal(LiteralValue::Bytes(b)) => b.inner().len() as u64,
        Expr::Literal(_) => 1,
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(Size::fixed(n))
}

/// Scalars have size 1 (`isScalar`): numbers, bools, durations, timestamps and optionals of those.
fn is_scalar(t: &CelType) -> bool {
    match t.kind() {
        Kind::Bool | Kind::Double | Kind::Duration | Kind::Int | Kind::Timestamp | Kind::Uint => true,
        Kind::Opaque => t.optional_inner().is_some_and(is_scalar),
        _ => false,
    }
}

impl Coster<'_> {
    /// `computeSize`.
    pub(super) fn compute_size(&mut self, e: &IdedExpr) -> Option<Size> {
        if let Some(size) = self.sizes.get(&e.id) {
            return Some(*size);
        }
        if let Some(size) = expression_size(e) {
            return Some(size);
        }
        if let Some(size) = estimate_size(&self.path(e).steps()) {
            self.sizes.insert(e.id, size);
            return Some(size);
        }
        if is_scalar(&self.type_of(e.id)) {
            return Some(Size::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr {
            return self.local(name).and_then(|v| v.size);
        }
        None
    }

    pub(super) fn size_or_unknown(&mut self, e: &IdedExpr) -> Size {
        self.compute_size(e).unwrap_or(Size::UNKNOWN)
    }

    pub(super) fn set_size(&mut self, e: &IdedExpr, size: Option<Size>) {
        if let Some(size) = size {
            self.sizes.insert(e.id, size);
        }
    }

    pub(super) fn set_entry_size(&mut self, e: &IdedExpr, entry: Option<EntrySize>) {
        if let Some(entry) = entry {
            self.entry_sizes.insert(e.id, entry);
        }
    }

    /// `computeEntrySize`.
    pub(super) fn entry_size(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(entry) = self.entry_sizes.get(&e.id) {
            return Some(*entry);
        }
        match &e.expr {
            Expr::Ident(name) => self.local(name).and_then(|v| v.entry),
            _ => None,
        }
    }

    /// The entry size of a value that is one of two (`_?_:_`) or both (`_+_`): the union of
    /// theirs, where both are known.
    pub(super) fn set_union_entry_size(&mut self, id: u64, a: &Node, b: &Node) {
        let sizes = (
            a.expr.and_then(|a| self.entry_size(a)),
            b.expr.and_then(|b| self.entry_size(b)),
        );
        if let (Some(a), Some(b)) = sizes {
            let entry = EntrySize {
                container: a.container,
                key: a.key.union(b.key),
                value: a.value.union(b.value),
            };
            self.entry_sizes.insert(id, entry);
        }
    }

    pub(super) fn copy_size_estimates(&mut self, to: &IdedExpr, from: &IdedExpr) {
        let size = self.compute_size(from);
        self.set_size(to, size);
        let entry = self.entry_size(from);
        self.set_entry_size(to, entry);
    }

    /// `newAstNode`: what function estimators see of an argument.
    pub(super) fn node<'e>(&mut self, e: &'e IdedExpr) -> Node<'e> {
        let mut path = self.path(e);
        if path
            .first()
            .is_some_and(|root| root == ACCUMULATOR || root == LEGACY_ACCUMULATOR)
        {
            path = GoPath::default();
        }
        Node {
            expr: Some(e),
            path,
            ty: self.type_of(e.id),
            computed: self.compute_size(e),
        }
    }

    /// `pushLocalVar`: a binding or accumulator, sized as the expression it is bound to.
    pub(super) fn push_bound(&mut self, name: &str, e: &IdedExpr) {
        let path = self.path(e);
        let entry = self.entry_size(e);
        let size = self.compute_size(e);
        self.push_local(name, LocalVar { path, size, entry });
    }

    /// The container kind of a comprehension range: from its entry sizes, else its type.
    fn container(&self, range: &IdedExpr, entry: Option<EntrySize>) -> Kind {
        match entry {
            Some(entry) if entry.container != Kind::Dyn => entry.container,
            _ => self.type_of(range.id).kind(),
        }
    }

    /// `pushIterSingle`: the one variable of a comprehension, an element or a key.
    pub(super) fn push_iteration_variable(&mut self, name: &str, range: &IdedExpr) {
        let entry = self.entry_size(range);
        let list = self.container(range, entry) == Kind::List;
        let (size, step) = match list {
            true => (entry.map(|e| e.value), "@items"),
            false => (entry.map(|e| e.key), "@keys"),
        };
        let path = self.path(range).append(step);
        self.push_local(
            name,
            LocalVar {
                path,
                size,
                entry: None,
            },
        );
    }

    /// `pushIterKey` and `pushIterValue`: the two variables of a two-variable comprehension.
    pub(super) fn push_iteration_variables(&mut self, key: &str, value: &str, range: &IdedExpr) {
        let entry = self.entry_size(range);
        let list = self.container(range, entry) == Kind::List;
        let (key_step, value_step) = if list {
            ("@indices", "@items")
        } else {
            ("@keys", "@values")
        };
        for (name, step, size) in [
            (key, key_step, entry.map(|e| e.key)),
            (value, value_step, entry.map(|e| e.value)),
        ] {
            let path = self.path(range).append(step);
            self.push_local(
                name,
                LocalVar {
                    path,
                    size,
                    entry: None,
                },
            );
        }
    }
}
