//! Opaque driver configs `resource.gpu.deckhouse.io/v1alpha1`: what a DeviceClass or a claim may
//! pass to the node for one of our devices (ARCHITECTURE.md section 3). Decoded strictly: an
//! unknown field is an error, and every error names the field and the allowed values. Which config
//! applies to a request follows the scheduler's copy in the claim's status: class first, claim
//! after, the later wins.
//!
//! Nothing here decides whether a config fits a device: that needs the published catalog, which
//! lives above this crate.

mod decode;
mod error;
mod precedence;
mod types;

pub use error::ConfigError;
pub use precedence::{InvalidConfig, SOURCE_CLAIM, SOURCE_CLASS, class_allows_vfio, config_for_request};
pub use types::*;

/// The `apiVersion` of every opaque config of ours.
pub const OPAQUE_CONFIG_API_VERSION: &str = "resource.gpu.deckhouse.io/v1alpha1";
