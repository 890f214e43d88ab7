//! The kubelet plugin transport. Work package in progress: `preparer` is the contract between the
//! gRPC services and the node's prepare pipeline.

mod preparer;

pub use preparer::{ClaimPreparer, ClaimRef, PreparedDevice};
