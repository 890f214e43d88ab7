//! The worst-case cost of a checked selector, ported from cel-go's estimator (`checker/cost.go`)
//! with the Kubernetes function costs (`apiserver/pkg/cel/library/cost.go`), the list and set
//! extension estimators and the DRA compiler's size declarations, so the estimate is the
//! `MaxCost` the API server compares with `CELSelectorExpressionMaxCost`.

mod comprehension;
mod device;
pub(crate) mod estimate;
mod functions;
mod kubernetes;
mod path;
mod sizes;

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::check::{CelType, Checked, Kind};
use crate::release::KubernetesRelease;
use estimate::{Cost, LIST_CREATE, MAP_CREATE, STRUCT_CREATE, Size};
use path::GoPath;

/// The entry sizes of a list or map: index or key, and element or value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntrySize {
    pub(crate) container: Kind,
    pub(crate) key: Size,
    pub(crate) value: Size,
}

/// A variable in scope: a comprehension variable, accumulator or binding.
#[derive(Clone, Debug)]
struct LocalVar {
    path: GoPath,
    size: Option<Size>,
    entry: Option<EntrySize>,
}

/// What a function estimator knows of an argument (cel-go `AstNode`).
pub(crate) struct Node<'a> {
    /// `None` for the element node of a list (`itemsNode`).
    pub(crate) expr: Option<&'a IdedExpr>,
    pub(crate) path: GoPath,
    pub(crate) ty: CelType,
    pub(crate) computed: Option<Size>,
}

/// The estimator's walk over one checked expression.
pub(crate) struct Coster<'c> {
    checked: &'c Checked,
    release: KubernetesRelease,
    paths: HashMap<u64, GoPath>,
    locals: HashMap<String, Vec<LocalVar>>,
    sizes: HashMap<u64, Size>,
    entry_sizes: HashMap<u64, EntrySize>,
}

/// The estimated maximum cost of `expr`, checked into `checked`.
pub(crate) fn max_cost(expr: &IdedExpr, checked: &Checked, release: KubernetesRelease) -> u64 {
    let mut coster = Coster {
        checked,
        release,
        paths: HashMap::new(),
        locals: HashMap::new(),
        sizes: HashMap::new(),
        entry_sizes: HashMap::new(),
    };
    coster.cost(expr).max
}

impl<'c> Coster<'c> {
    fn cost(&mut self, e: &IdedExpr) -> Cost {
        match &e.expr {
            Expr::Literal(_) => Cost::default(),
            Expr::Ident(name) => {
                let path = match self.local(name) {
                    Some(v) => v.path.clone(),
                    None => GoPath::root(name),
                };
                self.paths.insert(e.id, path);
                Cost::fixed(1)
            }
            Expr::Select(select) => {
                // has() costs nothing beyond its operand (PresenceTestHasCost(false)).
                let mut sum = self.cost(&select.operand);
                if select.test {
                    return sum;
                }
                if matches!(
                    self.type_of(select.operand.id).kind(),
                    Kind::Map | Kind::Struct | Kind::Param
                ) {
                    sum = sum.add(Cost::fixed(1));
                }
                let path = self.path(&select.operand).append(&select.field);
                self.paths.insert(e.id, path);
                sum
            }
            Expr::Call(_) => self.cost_call(e),
            Expr::List(list) => {
                let mut sum = Cost::default();
                let mut item = Size {
                    min: if list.elements.is_empty() { 0 } else { u64::MAX },
                    max: 0,
                };
                for element in &list.elements {
                    sum = sum.add(self.cost(element));
                    item = item.union(self.size_or_unknown(element));
                }
                self.entry_sizes.insert(
                    e.id,
                    EntrySize {
                        container: Kind::List,
                        key: Size::fixed(1),
                        value: item,
                    },
                );
                sum.add(Cost::fixed(LIST_CREATE))
            }
            Expr::Map(map) => {
                let mut sum = Cost::default();
                let start = if map.entries.is_empty() { 0 } else { u64::MAX };
                let (mut key, mut value) = (Size { min: start, max: 0 }, Size { min: start, max: 0 });
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        sum = sum.add(self.cost(&m.key)).add(self.cost(&m.value));
                        key = key.union(self.size_or_unknown(&m.key));
                        value = value.union(self.size_or_unknown(&m.value));
                    }
                }
                self.entry_sizes.insert(
                    e.id,
                    EntrySize {
                        container: Kind::Map,
                        key,
                        value,
                    },
                );
                sum.add(Cost::fixed(MAP_CREATE))
            }
            Expr::Struct(s) => {
                let mut sum = Cost::fixed(STRUCT_CREATE);
                for field in &s.entries {
                    if let EntryExpr::StructField(f) = &field.expr {
                        sum = sum.add(self.cost(&f.value));
                    }
                }
                sum
            }
            Expr::Comprehension(_) => self.cost_comprehension(e),
            Expr::Unspecified => Cost::default(),
        }
    }

    fn type_of(&self, id: u64) -> CelType {
        self.checked.types.get(&id).cloned().unwrap_or(CelType::Dyn)
    }

    fn local(&self, name: &str) -> Option<&LocalVar> {
        self.locals.get(name).and_then(|stack| stack.last())
    }

    fn push_local(&mut self, name: &str, var: LocalVar) {
        self.locals.entry(name.to_owned()).or_default().push(var);
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(stack) = self.locals.get_mut(name) {
            stack.pop();
        }
    }

    /// `getPath`: the field path of `e` through the declared variables, empty when none.
    fn path(&self, e: &IdedExpr) -> GoPath {
        if let Expr::Ident(name) = &e.expr
            && let Some(v) = self.local(name)
        {
            return v.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }
}
