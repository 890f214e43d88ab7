//! Step 1: one prepare or unprepare at a time on the node.

use super::{PrepareRun, PrepareStep};
use crate::error::PrepareError;
use crate::node_lock;

pub(crate) struct TakeNodeLock;

impl PrepareStep for TakeNodeLock {
    fn name(&self) -> &'static str {
        "take the node lock"
    }

    fn id(&self) -> &'static str {
        "take-node-lock"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        run.lock = Some(node_lock::acquire(&run.config.lock_path(), run.config.lock_timeout)?);
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        run.lock = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_node::{Node, physical_request};

    #[test]
    fn holds_the_lock_until_undone() {
        let node = Node::a30();
        let request = physical_request("uid-a");
        let mut run = node.run(&request);
        TakeNodeLock.run(&mut run).unwrap();
        let busy = node_lock::acquire(&node.config().lock_path(), std::time::Duration::ZERO);
        assert!(matches!(busy, Err(PrepareError::LockTimeout { .. })));
        TakeNodeLock.undo(&mut run);
        node_lock::acquire(&node.config().lock_path(), std::time::Duration::ZERO).expect("released by undo");
    }
}
