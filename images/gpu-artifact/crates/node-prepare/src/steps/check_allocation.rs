//! Step 3: refuse, before anything changes, a request this node must not
//! carry out (see `checks`).

use super::{PrepareRun, PrepareStep};
use crate::checks;
use crate::error::PrepareError;

pub(crate) struct CheckAllocation;

impl PrepareStep for CheckAllocation {
    fn name(&self) -> &'static str {
        "check the allocation"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        match checks::refusal(run.request, &run.checkpoint, &run.config.pool_name()) {
            Some(reason) => Err(PrepareError::refused(&run.claim_label(), reason)),
            None => Ok(()),
        }
    }

    /// Checking changes nothing.
    fn undo(&self, _run: &mut PrepareRun<'_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_node::TestNode;

    #[test]
    fn a_refusal_names_the_claim_and_the_device() {
        let node = TestNode::a30();
        let mut request = node.physical_request("uid-a");
        request.devices[0].pool = "gpus/elsewhere".into();
        let mut run = node.run(&request);
        let error = CheckAllocation.run(&mut run).unwrap_err().to_string();
        assert_eq!(
            error,
            "claim default/uid-a: device gpu0 is from pool gpus/elsewhere, not this node's pool gpus/w1"
        );
    }
}
