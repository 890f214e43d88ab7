//! The DRA compiler's size estimator (k8s.io/dynamic-resource-allocation/cel compile.go
//! `sizeEstimator`): the largest size of whatever a path through `device` reaches, from the
//! declared types and the resource.k8s.io/v1 limits.

use super::estimate::Size;

/// `DriverNameMaxLength`.
const DRIVER_NAME_MAX_LENGTH: u64 = 63;
/// `DeviceMaxDomainLength`.
const DOMAIN_MAX_LENGTH: u64 = 63;
/// `DeviceMaxIDLength`.
const ID_MAX_LENGTH: u64 = 32;
/// `DeviceAttributeMaxValueLength`.
const ATTRIBUTE_VALUE_MAX_LENGTH: u64 = 64;
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
const ATTRIBUTES_PER_DEVICE: u64 = 32;

/// One node of the declared `device` type (an `apiservercel.DeclType`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decl {
    Device,
    Driver,
    AllowMultipleAllocations,
    /// `attributes` and `capacity`: domain to inner map.
    OuterMap {
        capacity: bool,
    },
    /// One domain's attributes or capacities: id to value.
    InnerMap {
        capacity: bool,
    },
    Domain,
    Id,
    /// An attribute value: of unknown type, at most 64 long.
    Attribute,
    Quantity,
}

impl Decl {
    fn max_elements(self) -> u64 {
        match self {
            Decl::Driver => DRIVER_NAME_MAX_LENGTH,
            Decl::AllowMultipleAllocations => 1,
            Decl::OuterMap { .. } | Decl::InnerMap { .. } => ATTRIBUTES_PER_DEVICE,
            Decl::Domain => DOMAIN_MAX_LENGTH,
            Decl::Id => ID_MAX_LENGTH,
            Decl::Attribute => ATTRIBUTE_VALUE_MAX_LENGTH,
            Decl::Device | Decl::Quantity => 0,
        }
    }

    fn element(self) -> Option<Decl> {
        match self {
            Decl::OuterMap { capacity } => Some(Decl::InnerMap { capacity }),
            Decl::InnerMap { capacity: false } => Some(Decl::Attribute),
            Decl::InnerMap { capacity: true } => Some(Decl::Quantity),
            _ => None,
        }
    }

    fn key(self) -> Option<Decl> {
        match self {
            Decl::OuterMap { .. } => Some(Decl::Domain),
            Decl::InnerMap { .. } => Some(Decl::Id),
            _ => None,
        }
    }

    fn field(self, name: &str) -> Option<Decl> {
        match (self, name) {
            (Decl::Device, "driver") => Some(Decl::Driver),
            (Decl::Device, "allowMultipleAllocations") => Some(Decl::AllowMultipleAllocations),
            (Decl::Device, "attributes") => Some(Decl::OuterMap { capacity: false }),
            (Decl::Device, "capacity") => Some(Decl::OuterMap { capacity: true }),
            // Any name selected from one domain's attributes is an attribute value.
            (Decl::InnerMap { capacity: false }, _) => Some(Decl::Attribute),
            _ => None,
        }
    }
}

/// The size estimate for `path` (a variable, then field names, `@items`, `@values` or
/// `@keys`), or `None` where the DRA estimator gives none.
pub(crate) fn estimate_size(path: &[String]) -> Option<Size> {
    let (root, rest) = path.split_first()?;
    if root != "device" {
        return None;
    }
    let mut node = Decl::Device;
    for step in rest {
        node = match step.as_str() {
            "@items" | "@values" => node.element()?,
            "@keys" => node.key()?,
            name => node.field(name)?,
        };
    }
    Some(Size {
        min: 0,
        max: node.max_elements(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(path: &str) -> Option<u64> {
        let path: Vec<String> = path.split(' ').map(str::to_owned).collect();
        estimate_size(&path).map(|s| s.max)
    }

    #[test]
    fn paths_reach_the_declared_limits() {
        assert_eq!(size("device driver"), Some(63));
        assert_eq!(size("device allowMultipleAllocations"), Some(1));
        assert_eq!(size("device attributes"), Some(32));
        assert_eq!(size("device attributes @keys"), Some(63));
        assert_eq!(size("device attributes @values @keys"), Some(32));
        assert_eq!(size("device attributes @values model"), Some(64));
        assert_eq!(size("device attributes @values @values"), Some(64));
        assert_eq!(size("device capacity @values memory"), None);
        assert_eq!(size("device capacity @values @values"), Some(0));
        // A domain selected as a field of the outer map is not an attribute map to the estimator.
        assert_eq!(size("device attributes gpu"), None);
        assert_eq!(size("x attributes"), None);
    }
}
