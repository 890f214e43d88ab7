//! The Kubernetes DRA CEL environment, for evaluating DeviceClass and claim selectors the way the
//! kube-scheduler does: `device.driver`, `device.attributes[domain].name`,
//! `device.capacity[domain].name`, `device.allowMultipleAllocations`, the quantity and semver
//! libraries and the string and list extensions, with a compile cache. Also the exact
//! `Quantity` and `Semver` types the allocator does its arithmetic with.
//!
//! It must never do I/O or know about allocation: it answers "does this device match this
//! expression", nothing more.
//!
//! Each distinct expression is checked once, as the API server checks a new selector
//! (k8s.io/dynamic-resource-allocation/cel `CompileCELExpression` in the environment for new
//! expressions of a [`KubernetesRelease`], with the test bed's DRAConsumableCapacity gate): parsed
//! with that environment's macros, type-checked against its declarations (the `device` object
//! type, attribute values of type `any`, every function overload of the Kubernetes base
//! environment), run through its AST validators and program planner, required to result in bool
//! or the attribute type, and its worst-case cost estimated as cel-go does with the DRA size
//! declarations; a cost over [`MAX_COST`] is refused. Errors carry cel-go's words and positions.
//! A differential test (dra-allocator `tests/cel_differential.rs`) holds this to the real
//! compiler of 1.34 and 1.37: the same expressions refused, the same `MaxCost`.
//!
//! Known differences from the scheduler's environment (cel-go):
//! - Functions the environment declares but the `cel` crate does not implement pass the check
//!   and fail when evaluated: the URL, IP, CIDR, format and authorization libraries, `find` and
//!   `findAll`, `sets.*`, the Kubernetes list functions (`isSorted`, `sum`, `min`, `max`, and
//!   `indexOf`/`lastIndexOf` on lists), `first`/`last`, `optional.unwrap`, and the two-variable
//!   comprehensions (`all`/`exists`/`existsOne` with two variables, `transformList`,
//!   `transformMap`, `transformMapEntry`).
//! - The check is the API server's for new selectors of one release; the scheduler compiles
//!   stored selectors in a wider environment (every library version, and with the alpha
//!   DRAListTypeAttributes gate list-valued attributes), which a selector stored under other
//!   gates may need.
//! - No runtime cost accounting: cel-go's estimate bounds the runtime cost, so a selector whose
//!   estimate is within the limit cannot reach the scheduler's runtime limit of 1,000,000.
//! - Conservative where cel-go's behaviour depends on the Go release the API server is built
//!   with: Unicode class names in regular expressions must be spelled as Go's `unicode` tables
//!   name them (`\p{Greek}`; newer Go releases also take `\p{greek}`), and the regular-expression
//!   nesting limit is approximated. No cost estimate is known to differ from cel-go's.
//! - An unknown attribute domain outside the driver's own, `gpu.deckhouse.io` and
//!   `resource.kubernetes.io` is a missing key rather than an empty map.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing))]

mod check;
mod cost;
mod deep_stack;
mod device;
mod error;
mod kubernetes_library;
mod quantity;
mod release;
mod selector;
mod semver;

pub use check::{DeclaredOverload, declared_overloads};
pub use device::DeviceContext;
pub use error::CelError;
pub use quantity::{Quantity, QuantityError};
pub use release::KubernetesRelease;
pub use selector::{
    CompiledSelector, MAX_COST, MAX_EXPRESSION_LENGTH, SelectorCache, dra_environment, estimate_max_cost,
};
pub use semver::{Semver, SemverError};
