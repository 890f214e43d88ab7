//! The checker for list and map literals and comprehensions (cel-go `checkCreateList`,
//! `checkCreateMap`, `checkComprehension`, `joinTypes`).

use cel::common::ast::{Expr, IdedExpr};

use super::checker::{Checker, map_entries};
use super::types::CelType;
use super::unify::most_general;

impl Checker<'_> {
    /// The common type of aggregate elements so far and the next one: the more general of the
    /// two when they unify, else `dyn` (mixed literals are reported later by a validator).
    fn join_types(&mut self, previous: Option<CelType>, current: CelType) -> CelType {
        match previous {
            None => current,
            Some(previous) if self.is_assignable(&previous, &current) => most_general(&previous, &current),
            Some(_) => CelType::Dyn,
        }
    }

    /// The element type of an optional element (`[?x]`, `{?k: v}`), reporting a non-optional one.
    fn unwrap_optional_element(&mut self, id: u64, t: CelType) -> CelType {
        match t.optional_inner() {
            Some(inner) => inner.clone(),
            None => {
                if !t.is_dyn() {
                    let message = format!(
                        "expected type '{}' but found '{}'",
                        CelType::optional(t.clone()).format(),
                        t.format()
                    );
                    self.error(id, message);
                }
                t
            }
        }
    }

    pub(super) fn check_list(&mut self, e: &mut IdedExpr) {
        let Expr::List(list) = &mut e.expr else { unreachable!() };
        let mut element_type = None;
        for (i, element) in list.elements.iter_mut().enumerate() {
            self.check(element);
            let mut t = self.type_of(element.id);
            if list.optional_indices.contains(&i) {
                t = self.unwrap_optional_element(element.id, t);
            }
            element_type = Some(self.join_types(element_type, t));
        }
        let element_type = element_type.unwrap_or_else(|| self.new_type_var());
        self.set_type(e.id, CelType::list(element_type));
    }

    pub(super) fn check_map(&mut self, e: &mut IdedExpr) {
        let Expr::Map(map) = &mut e.expr else { unreachable!() };
        let (mut key_type, mut value_type) = (None, None);
        for entry in map_entries(&mut map.entries) {
            self.check(&mut entry.key);
            let t = self.type_of(entry.key.id);
            key_type = Some(self.join_types(key_type, t));
            self.check(&mut entry.value);
            let mut t = self.type_of(entry.value.id);
            if entry.optional {
                t = self.unwrap_optional_element(entry.value.id, t);
            }
            value_type = Some(self.join_types(value_type, t));
        }
        let (key, value) = match (key_type, value_type) {
            (Some(k), Some(v)) => (k, v),
            _ => (self.new_type_var(), self.new_type_var()),
        };
        self.set_type(e.id, CelType::map(key, value));
    }

    pub(super) fn check_comprehension(&mut self, e: &mut IdedExpr) {
        let Expr::Comprehension(c) = &mut e.expr else {
            unreachable!()
        };
        self.check(&mut c.iter_range);
        self.check(&mut c.accu_init);
        let range_type = self.substituted(c.iter_range.id);
        let accu_type = self.type_of(c.accu_init.id);
        self.enter_scope(vec![(c.accu_var.clone(), accu_type.clone())]);
        let two = c.iter_var2.is_some();
        let (var_type, var2_type) = match &range_type {
            CelType::List(elem) if two => (CelType::Int, elem.as_ref().clone()),
            CelType::List(elem) => (elem.as_ref().clone(), CelType::Error),
            CelType::Map(key, value) => (key.as_ref().clone(), value.as_ref().clone()),
            CelType::Dyn | CelType::Error | CelType::Param(_) => {
                self.is_assignable(&CelType::Dyn, &range_type);
                (CelType::Dyn, CelType::Dyn)
            }
            other => {
                let message = format!(
                    "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                    other.format()
                );
                self.error(c.iter_range.id, message);
                (CelType::Error, CelType::Error)
            }
        };
        let mut loop_vars = vec![(c.iter_var.clone(), var_type)];
        if let Some(var2) = &c.iter_var2 {
            loop_vars.push((var2.clone(), var2_type));
        }
        self.enter_scope(loop_vars);
        self.check(&mut c.loop_cond);
        self.assert_type(c.loop_cond.id, &CelType::Bool);
        self.check(&mut c.loop_step);
        self.assert_type(c.loop_step.id, &accu_type);
        self.exit_scope();
        self.check(&mut c.result);
        self.exit_scope();
        let t = self.substituted(c.result.id);
        self.set_type(e.id, t);
    }

    fn assert_type(&mut self, id: u64, expected: &CelType) {
        let actual = self.type_of(id);
        if !self.is_assignable(expected, &actual) {
            self.error(
                id,
                format!("expected type '{}' but found '{}'", expected.format(), actual.format()),
            );
        }
    }
}
