//! Costs of comprehensions (`costComprehension`) and of `cel.bind` (`costBind`): a loop costs
//! its condition and step once per element of the largest range the estimator can see.

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue};

use super::Coster;
use super::estimate::Cost;
use crate::check::LEGACY_ACCUMULATOR;

/// A comprehension over an empty list that never loops: how `cel.bind` and the optional and
/// sortBy macros bind a variable.
fn is_bind(c: &ComprehensionExpr) -> bool {
    matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
        && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        && c.accu_var != LEGACY_ACCUMULATOR
}

impl Coster<'_> {
    pub(super) fn cost_comprehension(&mut self, e: &IdedExpr) -> Cost {
        let Expr::Comprehension(c) = &e.expr else {
            unreachable!()
        };
        if is_bind(c) {
            let mut sum = self.cost(&c.iter_range).add(self.cost(&c.accu_init));
            self.push_bound(&c.accu_var, &c.accu_init);
            sum = sum.add(self.cost(&c.result));
            self.pop_local(&c.accu_var);
            self.copy_size_estimates(e, &c.result);
            return sum;
        }
        let mut sum = self.cost(&c.iter_range).add(self.cost(&c.accu_init));
        self.push_bound(&c.accu_var, &c.accu_init);
        match &c.iter_var2 {
            Some(var2) => self.push_iteration_variables(&c.iter_var, var2, &c.iter_range),
            None => self.push_iteration_variable(&c.iter_var, &c.iter_range),
        }
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.pop_local(&c.iter_var);
        if let Some(var2) = &c.iter_var2 {
            self.pop_local(var2);
        }
        sum = sum.add(self.cost(&c.result));
        self.pop_local(&c.accu_var);
        let range = self.size_or_unknown(&c.iter_range);
        sum = sum.add(range.times_cost(step_cost.add(loop_cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                let size = self.compute_size(&c.accu_init);
                self.set_size(e, size);
            }
            Expr::List(_) | Expr::Map(_) => {
                self.set_size(e, Some(range));
                let entry = self.entry_size(&c.loop_step);
                self.set_entry_size(e, entry);
            }
            _ => {}
        }
        sum
    }
}
