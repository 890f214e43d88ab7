//! The node of the unit tests: the integration tests' A30 node (`tests/support`, one source for
//! both), whose preparer's own config, backend and checkpoint store drive single steps.

#[path = "../tests/support/mod.rs"]
mod support;

pub(crate) use support::{Node, mig_request, physical_request};

use crate::checkpoint::CheckpointStore;
use crate::config::NodePrepareConfig;
use crate::request::PrepareRequest;
use crate::steps::PrepareRun;

impl Node {
    /// A run of `request` through this node's preparer, for stepping the pipeline by hand.
    pub fn run<'a>(&'a self, request: &'a PrepareRequest) -> PrepareRun<'a> {
        let preparer = &self.preparer;
        PrepareRun::new(&preparer.config, preparer.backend.as_ref(), &preparer.store, request)
    }

    pub fn config(&self) -> &NodePrepareConfig {
        &self.preparer.config
    }

    pub fn store(&self) -> &CheckpointStore {
        &self.preparer.store
    }
}
