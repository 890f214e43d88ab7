//! Type assignability and type-parameter substitution, ported from cel-go's `checker/types.go`
//! and `checker/mapping.go`, so overloads resolve and results are typed exactly as there.

use std::collections::HashMap;

use super::types::{CelType, Kind};

/// Bindings of type parameters (by name) found so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mapping {
    bound: HashMap<String, CelType>,
}

impl Mapping {
    fn find(&self, t: &CelType) -> Option<&CelType> {
        match t {
            CelType::Param(name) => self.bound.get(name),
            _ => None,
        }
    }

    fn add(&mut self, param: &CelType, to: CelType) {
        if let CelType::Param(name) = param {
            self.bound.insert(name.clone(), to);
        }
    }

    /// Whether `from` can be assigned to `to`; on success the bindings this needs are kept.
    pub(crate) fn assign(&mut self, to: &CelType, from: &CelType) -> bool {
        let mut copy = self.clone();
        if is_assignable(&mut copy, from, to) {
            *self = copy;
            return true;
        }
        false
    }

    /// Whether each of `from` can be assigned to the type at the same position in `to`.
    pub(crate) fn assign_all(&mut self, from: &[CelType], to: &[CelType]) -> bool {
        let mut copy = self.clone();
        if is_assignable_list(&mut copy, from, to) {
            *self = copy;
            return true;
        }
        false
    }

    /// `substitute`: `t` with bound parameters replaced, and unbound ones by `dyn` when
    /// `params_to_dyn`.
    pub(crate) fn substitute(&self, t: &CelType, params_to_dyn: bool) -> CelType {
        if let Some(bound) = self.find(t) {
            return self.substitute(bound, params_to_dyn);
        }
        match t {
            CelType::Param(_) if params_to_dyn => CelType::Dyn,
            CelType::List(_) | CelType::Map(..) | CelType::Opaque(..) | CelType::Type(Some(_)) => t.with_parameters(
                t.parameters()
                    .into_iter()
                    .map(|p| self.substitute(p, params_to_dyn))
                    .collect(),
            ),
            _ => t.clone(),
        }
    }
}

/// `internalIsAssignable`: whether `t1` is assignable to `t2`.
fn is_assignable(m: &mut Mapping, t1: &CelType, t2: &CelType) -> bool {
    let (kind1, kind2) = (t1.kind(), t2.kind());
    if kind2 == Kind::Param {
        let (valid, t2_has_sub) = is_valid_type_substitution(m, t1, t2);
        if valid {
            return true;
        }
        if t2_has_sub {
            return false;
        }
    }
    if kind1 == Kind::Param {
        return is_valid_type_substitution(m, t2, t1).0;
    }
    if t1.is_dyn_or_error() || t2.is_dyn_or_error() {
        return true;
    }
    if kind1 == Kind::Null {
        return is_nullable(t2);
    }
    if kind2 == Kind::Null {
        return is_nullable(t1);
    }
    match kind1 {
        Kind::Bool
        | Kind::Bytes
        | Kind::Double
        | Kind::Int
        | Kind::String
        | Kind::Uint
        | Kind::Any
        | Kind::Duration
        | Kind::Timestamp
        | Kind::Struct => type_accepts(t2, t1),
        Kind::Type => kind2 == Kind::Type,
        Kind::Opaque | Kind::List | Kind::Map => {
            kind1 == kind2 && t1.type_name() == t2.type_name() && {
                let (p1, p2): (Vec<CelType>, Vec<CelType>) = (
                    t1.parameters().into_iter().cloned().collect(),
                    t2.parameters().into_iter().cloned().collect(),
                );
                is_assignable_list(m, &p1, &p2)
            }
        }
        _ => false,
    }
}

/// `Type.IsAssignableType` (default rules): whether a `to` value accepts a `from` value.
fn type_accepts(to: &CelType, from: &CelType) -> bool {
    if to == from || matches!(to.kind(), Kind::Dyn | Kind::Any | Kind::Param) {
        return true;
    }
    let (pt, pf) = (to.parameters(), from.parameters());
    to.kind() == from.kind()
        && to.type_name() == from.type_name()
        && pt.len() == pf.len()
        && pt.iter().zip(pf).all(|(t, f)| type_accepts(t, f))
}

/// Null is assignable to opaque, object and well-known types (`isLegacyNullable`).
fn is_nullable(t: &CelType) -> bool {
    matches!(
        t.kind(),
        Kind::Opaque | Kind::Struct | Kind::Any | Kind::Duration | Kind::Timestamp | Kind::Null | Kind::Dyn
    )
}

fn is_valid_type_substitution(m: &mut Mapping, t1: &CelType, t2: &CelType) -> (bool, bool) {
    if t1.kind() == t2.kind() && t1 == t2 {
        return (true, true);
    }
    if let Some(t2_sub) = m.find(t2).cloned() {
        if t1.kind() == t2_sub.kind() && *t1 == t2_sub {
            return (true, true);
        }
        if is_assignable(m, t1, &t2_sub) {
            let general = most_general(t1, &t2_sub);
            if not_referenced_in(m, t2, &general) {
                m.add(t2, general);
            }
            return (true, true);
        }
        return (false, true);
    }
    if not_referenced_in(m, t2, t1) {
        m.add(t2, t1.clone());
        return (true, false);
    }
    (false, false)
}

fn is_assignable_list(m: &mut Mapping, l1: &[CelType], l2: &[CelType]) -> bool {
    l1.len() == l2.len() && l1.iter().zip(l2).all(|(a, b)| is_assignable(m, a, b))
}

/// `isEqualOrLessSpecific`: whether `t1` is `t2` or matches it through dyn.
fn is_equal_or_less_specific(t1: &CelType, t2: &CelType) -> bool {
    if t1.is_dyn() || t1.kind() == Kind::Param {
        return true;
    }
    if t2.is_dyn() || t2.kind() == Kind::Param || t1.kind() != t2.kind() {
        return false;
    }
    match t1.kind() {
        Kind::Opaque | Kind::List | Kind::Map => {
            let (p1, p2) = (t1.parameters(), t2.parameters());
            t1.type_name() == t2.type_name()
                && p1.len() == p2.len()
                && p1.iter().zip(p2).all(|(a, b)| is_equal_or_less_specific(a, b))
        }
        Kind::Type => true,
        _ => t1 == t2,
    }
}

/// `mostGeneral`: the more general of two types known to unify.
pub(crate) fn most_general(t1: &CelType, t2: &CelType) -> CelType {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

/// The occurs check: whether `t` does not appear in `within`, directly or through bindings.
fn not_referenced_in(m: &Mapping, t: &CelType, within: &CelType) -> bool {
    if t == within {
        return false;
    }
    match within.kind() {
        Kind::Param => match m.find(within) {
            Some(sub) => not_referenced_in(m, t, sub),
            None => true,
        },
        Kind::Opaque | Kind::List | Kind::Map | Kind::Type => {
            within.parameters().into_iter().all(|p| not_referenced_in(m, t, p))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_parameters_bind_to_the_most_general_argument() {
        let mut m = Mapping::default();
        let a = CelType::Param("A".into());
        assert!(m.assign_all(&[CelType::Int, CelType::Dyn], &[a.clone(), a.clone()]));
        assert_eq!(m.substitute(&a, false), CelType::Dyn);
        let mut m = Mapping::default();
        assert!(!m.assign_all(&[CelType::Int, CelType::String], &[a.clone(), a.clone()]));
        assert_eq!(m.substitute(&a, true), CelType::Dyn, "a failed match binds nothing");
    }

    #[test]
    fn null_goes_to_objects_but_not_to_primitives() {
        let mut m = Mapping::default();
        assert!(m.assign(&CelType::Struct("kubernetes.Quantity".into()), &CelType::Null));
        assert!(!m.assign(&CelType::Int, &CelType::Null));
        assert!(m.assign(&CelType::list(CelType::Int), &CelType::list(CelType::Any)));
    }
}
