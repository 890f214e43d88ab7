//! Costs of calls (`costCall`, `functionCost`): the overload estimators of cel-go's list and
//! set extensions first, then the Kubernetes estimator, then cel-go's own rules, else one unit
//! plus the arguments.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::estimate::{Cost, LIST_CREATE, REGEX_LENGTH, STRING_TRAVERSAL, Size};
use super::{Coster, Node};

/// A call's cost and, where known, its result's size.
pub(crate) struct CallEstimate {
    pub(crate) cost: Cost,
    pub(crate) result_size: Option<Size>,
}

impl CallEstimate {
    pub(crate) fn cost(cost: Cost) -> CallEstimate {
        CallEstimate {
            cost,
            result_size: None,
        }
    }
}

/// `sizeOrUnknown` of a node: the size it was given, else unknown.
pub(crate) fn node_size(node: &Node) -> Size {
    node.computed.unwrap_or(Size::UNKNOWN)
}

/// `estimateSize` of the extensions and the Kubernetes estimator: the node's size, else the
/// DRA estimate for its path, else unknown.
pub(crate) fn estimated_size(node: &Node) -> Size {
    node.computed
        .or_else(|| super::device::estimate_size(&node.path.steps()))
        .unwrap_or(Size::UNKNOWN)
}

/// `nodeAsUintValue`: a non-negative int literal argument, else `default`.
fn literal_uint(node: &Node, default: u64) -> u64 {
    match node.expr.map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::Int(i))) => (*i.inner()).max(0) as u64,
        _ => default,
    }
}

/// `estimateAllocatingListCall` of the list extension.
fn allocating_list_call(factor: f64, size: Size) -> CallEstimate {
    CallEstimate {
        cost: size.by_factor(factor).add(Cost::fixed(1)).add(Cost::fixed(LIST_CREATE)),
        result_size: Some(size),
    }
}

/// The overload estimators registered by the list (v3) and set extensions.
fn extension_estimate(overload: &str, target: Option<&Node>, args: &[Node], lists: bool) -> Option<CallEstimate> {
    let sets = |factor: f64| {
        let [list, other] = args else { return None };
        let size = estimated_size(list).multiply(estimated_size(other));
        Some(CallEstimate::cost(size.by_factor(factor).add(Cost::fixed(1))))
    };
    match overload {
        "list_sets_contains_list" | "list_sets_intersects_list" => return sets(1.0),
        "list_sets_equivalent_list" => return sets(2.0),
        _ if !lists => return None,
        _ => {}
    }
    let sort = |size: Size, element: &str| {
        let factor = if element == "string" || element == "bytes" {
            2.0 + STRING_TRAVERSAL
        } else {
            2.0
        };
        allocating_list_call(factor, size.multiply(size))
    };
    // `list_<element>_sort` and `list_<element>_sortByAssociatedKeys`.
    let sorted = |suffix: &str| {
        overload
            .strip_prefix("list_")
            .and_then(|rest| rest.strip_suffix(suffix))
    };
    match (overload, target, args) {
        ("list_slice", Some(t), [start, end]) => {
            let end = literal_uint(end, estimated_size(t).max);
            let start = literal_uint(start, 0);
            Some(allocating_list_call(1.0, Size::fixed(end.wrapping_sub(start))))
        }
        ("lists_range", None, [count]) => Some(allocating_list_call(1.0, Size::fixed(literal_uint(count, u64::MAX)))),
        ("list_reverse", Some(t), []) => Some(allocating_list_call(1.0, estimated_size(t))),
        ("list_flatten" | "list_flatten_int", Some(t), [] | [_]) => {
            let depth = args.first().map_or(1, |d| literal_uint(d, u64::MAX));
            Some(allocating_list_call(depth as f64, estimated_size(t)))
        }
        ("list_distinct", Some(t), []) => {
            let size = estimated_size(t);
            Some(allocating_list_call(2.0, size.multiply(size)))
        }
        (_, Some(t), []) => sorted("_sort").map(|element| sort(estimated_size(t), element)),
        (_, Some(_), [keys]) => sorted("_sortByAssociatedKeys").map(|element| sort(estimated_size(keys), element)),
        _ => None,
    }
}

impl Coster<'_> {
    pub(super) fn cost_call(&mut self, e: &IdedExpr) -> Cost {
        let Expr::Call(call) = &e.expr else { unreachable!() };
        if let ("dyn", [arg]) = (call.func_name.as_str(), call.args.as_slice()) {
            let arg_cost = self.cost(arg);
            self.copy_size_estimates(e, arg);
            return Cost::fixed(1).add(arg_cost);
        }
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            arg_costs.push(self.cost(arg));
            args.push(self.node(arg));
        }
        let Some(overloads) = self.checked.overloads.get(&e.id).cloned() else {
            return Cost::default();
        };
        let mut sum = Cost::default();
        let target = match &call.target {
            Some(t) => {
                sum = sum.add(self.cost(t));
                Some(self.node(t))
            }
            None => None,
        };
        let mut function_cost = Cost { min: u64::MAX, max: 0 };
        let mut result_size: Option<Size> = None;
        for overload in &overloads {
            let estimate = self.function_cost(e, &call.func_name, overload, target.as_ref(), &args, &arg_costs);
            function_cost = function_cost.union(estimate.cost);
            if let Some(size) = estimate.result_size {
                result_size = Some(result_size.map_or(size, |r| r.union(size)));
            }
            let step = match overload.as_str() {
                "index_list" => Some("@items"),
                "index_map" => Some("@values"),
                _ => None,
            };
            if let (Some(step), Some(container)) = (step, call.args.first()) {
                result_size = self.entry_size(container).map(|entry| entry.value);
                let path = self.path(container).append(step);
                self.paths.insert(e.id, path);
            }
            if result_size.is_none() {
                result_size = self.compute_size(e);
            }
        }
        self.set_size(e, result_size);
        sum.add(function_cost)
    }

    fn function_cost(
        &mut self,
        e: &IdedExpr,
        function: &str,
        overload: &str,
        target: Option<&Node>,
        args: &[Node],
        arg_costs: &[Cost],
    ) -> CallEstimate {
        let arg_sum = arg_costs.iter().fold(Cost::default(), |sum, c| sum.add(*c));
        let with_args = |estimate: CallEstimate| CallEstimate {
            cost: estimate.cost.add(arg_sum),
            result_size: estimate.result_size,
        };
        if let Some(estimate) = extension_estimate(overload, target, args, self.release.has_list_extension()) {
            return with_args(estimate);
        }
        if let Some(estimate) = super::kubernetes::estimate_call(function, overload, target, args) {
            return with_args(estimate);
        }
        let traversal = |size: Size| size.by_factor(STRING_TRAVERSAL);
        match (overload, target, args) {
            ("string_format", Some(t), _) => return CallEstimate::cost(traversal(node_size(t)).add(arg_sum)),
            ("string_to_bytes" | "bytes_to_string" | "strings_quote", _, [arg]) => {
                let size = node_size(arg);
                let result = match overload {
                    "string_to_bytes" => Size {
                        min: size.min,
                        max: size.max.wrapping_mul(4),
                    },
                    "bytes_to_string" => Size {
                        min: size.min / 4,
                        max: size.max,
                    },
                    _ => Size {
                        min: size.min.wrapping_add(2),
                        max: size.max.wrapping_mul(2).wrapping_add(2),
                    },
                };
                return CallEstimate {
                    cost: traversal(size).add(arg_sum),
                    result_size: Some(result),
                };
            }
            ("starts_with_string" | "ends_with_string", _, [prefix]) => {
                return CallEstimate::cost(traversal(node_size(prefix)).add(arg_sum));
            }
            ("in_list", _, [_, list]) => return CallEstimate::cost(node_size(list).by_factor(1.0).add(arg_sum)),
            ("matches_string", Some(string), [regex]) | ("matches", None, [string, regex])
                if overload == "matches_string" || self.release.estimates_global_matches() =>
            {
                let string_cost = traversal(node_size(string).add(Size::fixed(1)));
                let regex_cost = node_size(regex).by_factor(REGEX_LENGTH);
                return CallEstimate::cost(string_cost.multiply(regex_cost).add(arg_sum));
            }
            ("contains_string", Some(t), [sub]) => {
                let string_cost = traversal(node_size(t));
                let sub_cost = traversal(node_size(sub));
                return CallEstimate::cost(string_cost.multiply(sub_cost).add(arg_sum));
            }
            ("logical_or" | "logical_and", _, _) => {
                // The parser gives `&&` and `||` two operands; anything else costs as a plain call.
                if let [lhs, rhs] = arg_costs {
                    return CallEstimate::cost(Cost {
                        min: lhs.min,
                        max: lhs.add(*rhs).max,
                    });
                }
            }
            ("conditional", _, _) => {
                if let Some(estimate) = self.conditional_cost(e, args, arg_costs) {
                    return estimate;
                }
            }
            ("add_string" | "add_bytes" | "add_list", _, [lhs, rhs]) => {
                let size = node_size(lhs).add(node_size(rhs));
                self.set_union_entry_size(e.id, lhs, rhs);
                let cost = match overload {
                    "add_list" => Cost::fixed(1),
                    _ => traversal(size),
                };
                return CallEstimate {
                    cost: cost.add(arg_sum),
                    result_size: Some(size),
                };
            }
            (
                "less_string"
                | "greater_string"
                | "less_equals_string"
                | "greater_equals_string"
                | "less_bytes"
                | "greater_bytes"
                | "less_equals_bytes"
                | "greater_equals_bytes"
                | "equals"
                | "not_equals",
                _,
                [lhs, rhs],
            ) => {
                let smallest = node_size(lhs).max.min(node_size(rhs).max);
                let cost = Cost {
                    min: u64::from(smallest > 0),
                    max: smallest,
                };
                return CallEstimate::cost(cost.by_factor(STRING_TRAVERSAL).add(arg_sum));
            }
            _ => {}
        }
        CallEstimate::cost(Cost::fixed(1).add(arg_sum))
    }

    /// `_?_:_`; `None` unless it has the three operands the parser gives it.
    fn conditional_cost(&mut self, e: &IdedExpr, args: &[Node], arg_costs: &[Cost]) -> Option<CallEstimate> {
        let ([_, yes, no], [condition, yes_cost, no_cost]) = (args, arg_costs) else {
            return None;
        };
        let size = node_size(yes).union(node_size(no));
        self.set_union_entry_size(e.id, yes, no);
        Some(CallEstimate {
            cost: condition.add(yes_cost.union(*no_cost)),
            result_size: Some(size),
        })
    }
}

#[cfg(test)]
#[path = "functions_tests.rs"]
mod tests;
