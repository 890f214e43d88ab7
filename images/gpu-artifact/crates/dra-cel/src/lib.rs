//! The Kubernetes DRA CEL environment, for evaluating DeviceClass and claim selectors the way the
//! kube-scheduler does: `device.driver`, `device.attributes[domain].name`,
//! `device.capacity[domain].name`, `device.allowMultipleAllocations`, the quantity and semver
//! libraries and the string and list extensions, with a compile cache. Also the exact
//! `Quantity` and `Semver` types the allocator does its arithmetic with.
//!
//! It must never do I/O or know about allocation: it answers "does this device match this
//! expression", nothing more.
//!
//! Known differences from the scheduler's environment (cel-go): no static type check at compile
//! time (type errors surface when evaluated), no runtime cost accounting (the scheduler's limit of
//! 1,000,000 cost units cannot be reached by a selector over one device's ≤32 attributes without
//! comprehensions over large literals), and an unknown attribute domain outside the driver's own,
//! `gpu.deckhouse.io` and `resource.kubernetes.io` is a missing key rather than an empty map.

mod device;
mod error;
mod kubernetes_library;
mod quantity;
mod selector;
mod semver;

pub use device::DeviceContext;
pub use error::CelError;
pub use quantity::{Quantity, QuantityError};
pub use selector::{CompiledSelector, MAX_EXPRESSION_LENGTH, SelectorCache, dra_environment};
pub use semver::{Semver, SemverError};
