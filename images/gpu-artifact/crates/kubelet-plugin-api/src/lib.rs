//! The kubelet's plugin gRPC APIs as Rust types: plugin registration, the DRA service in v1 and
//! v1beta1, and the DRA health service (`DRAResourceHealth`) in v1alpha1, v1beta1 and v1, generated from our own `.proto` files (same packages, messages and field numbers as the
//! kubelet's, so the wire format matches). Clients and servers are both generated: the plugin serves,
//! the kubelet simulator calls. Beyond the generated code it offers only [`connect_unix_socket`], the
//! way both sides dial each other; it holds no behaviour of the plugin or the kubelet.

/// `pluginregistration.Registration`: how the kubelet discovers a plugin on its registry socket.
pub mod registration {
    tonic::include_proto!("pluginregistration");
}

/// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` (advertised as `v1.DRAPlugin`).
pub mod dra_v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}

/// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin` (advertised as `v1beta1.DRAPlugin`); no `share_id`.
pub mod dra_v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}

/// `v1alpha1.DRAResourceHealth`: what a 1.34-1.36 kubelet calls (1.34-1.35 with the
/// `ResourceHealthStatus` gate on); the 1.37 kubelet still accepts it until 1.40.
pub mod dra_health_v1alpha1 {
    tonic::include_proto!("v1alpha1");
}

/// `v1beta1.DRAResourceHealth`.
pub mod dra_health_v1beta1 {
    tonic::include_proto!("v1beta1");
}

/// `v1.DRAResourceHealth`: what a 1.37 kubelet prefers.
pub mod dra_health_v1 {
    tonic::include_proto!("v1");
}

mod unix_socket;

pub use unix_socket::connect_unix_socket;
