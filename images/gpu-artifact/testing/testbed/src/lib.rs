//! Test support for the gpu module's integration and e2e tests.
//!
//! Every test talks to the real control plane of the test bed (`tools/testbed`): etcd,
//! kube-apiserver, kube-scheduler and kube-controller-manager built from their Go modules.
//! [`TestCluster`] attaches to a running one (`GPU_TESTBED_KUBECONFIG`, set by `make test`) or starts
//! its own for this process. Each test works in a [`TestNamespace`]; cluster-scoped objects it makes
//! carry the namespace's label and go away with it, so tests of one run share the cluster safely.
//!
//! Never used by product code.

pub mod bashible;
mod cluster;
mod component;
mod listener;
mod namespace;
mod node;
mod port;
mod service_account;
mod wait;

pub use cluster::{TestCluster, start_control_plane};
pub use component::{ComponentProcess, component_binary};
pub use listener::close_listener;
pub use namespace::{OWNER_LABEL, TestNamespace};
pub use node::ReadyNode;
pub use port::ReservedPort;
pub use service_account::Access;
pub use wait::{Progress, wait_until};
