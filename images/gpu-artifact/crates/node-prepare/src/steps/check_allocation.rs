//! Step 3: refuse, before anything changes, a request this node must not
//! carry out (see `checks`).

use host_inventory::{HostRoot, detect_bare_metal};

use super::{PrepareRun, PrepareStep};
use crate::checks;
use crate::error::PrepareError;

pub(crate) struct CheckAllocation;

impl PrepareStep for CheckAllocation {
    fn name(&self) -> &'static str {
        "check the allocation"
    }

    fn id(&self) -> &'static str {
        "check-allocation"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let root = HostRoot::new(&run.config.host_root);
        let checked = checks::check(run.request, &run.checkpoint, &run.config.pool_name(), || {
            detect_bare_metal(&root)
        });
        match checked {
            Ok(plans) => {
                run.plans = plans;
                Ok(())
            }
            Err(reason) => Err(PrepareError::refused(&run.claim_label(), reason)),
        }
    }

    /// Checking changes nothing on the host.
    fn undo(&self, run: &mut PrepareRun<'_>) {
        run.plans.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_node::{Node, physical_request};

    #[test]
    fn a_refusal_names_the_claim_and_the_device() {
        let node = Node::a30();
        let mut request = physical_request("uid-a");
        request.devices[0].pool = "gpus/elsewhere".into();
        let mut run = node.run(&request);
        let error = CheckAllocation.run(&mut run).unwrap_err().to_string();
        assert_eq!(
            error,
            "claim default/claim-uid-a: device gpu0 is from pool gpus/elsewhere, not this node's pool gpus/w1"
        );
    }
}
