//! The kubelet plugin transport: the registration server on the kubelet's `plugins_registry`
//! socket and the DRA services (v1 and v1beta1) on the plugin's own socket, restart-safe, handing
//! every claim to a [`ClaimPreparer`]; and, given a [`HealthFeed`], the DRA health service
//! (v1alpha1, v1beta1, v1) on the same socket, streaming the devices' health to the kubelet.
//!
//! It must never decide anything about devices: what a claim means, and whether preparing it is
//! safe, belongs to the preparer. A claim's failure is reported for that claim only.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod config;
mod dra_service;
mod dra_versions;
mod health_service;
mod preparer;
mod registration;
mod server;
mod serving;
mod socket;
mod uds_authority;

pub use config::{DEFAULT_KUBELET_ROOT, DRIVER_NAME, PluginConfig};
pub use health_service::{DeviceHealthReport, HEALTH_TIMEOUT_SECONDS, HEARTBEAT, HealthFeed, ReportedHealth};
pub use preparer::{ClaimPreparer, ClaimRef, PreparedDevice};
pub use registration::{DRA_PLUGIN_TYPE, HEALTH_SERVICES, SUPPORTED_VERSIONS};
pub use server::PluginServer;
pub use serving::{SERVING_GATE, follow_serving};
pub use socket::SocketError;
