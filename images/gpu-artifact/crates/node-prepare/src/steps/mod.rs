//! The prepare pipeline: a fixed list of small steps, each with a `run` and
//! an `undo`. When step k fails, steps k-1..1 are undone in reverse order, so
//! a failed prepare leaves the node as it found it. No step reaches around
//! another: they share only [`PrepareRun`].

mod apply_sharing;
mod bind_vfio;
mod check_allocation;
mod create_devices;
mod load_checkpoint;
mod record_completed;
mod record_started;
mod take_node_lock;
mod write_cdi_spec;
mod write_vfio_payload;

use gpu_vendor::{PciAddress, VendorBackend};
use kubelet_plugin::PreparedDevice;

use crate::checkpoint::{CheckpointData, CheckpointStore, MigInstanceRecord, VfioRecord};
use crate::config::NodePrepareConfig;
use crate::device_plan::DevicePlan;
use crate::error::PrepareError;
use crate::fault_point::fault_point;
use crate::node_lock::NodeLockGuard;
use crate::request::{PrepareRequest, claim_label};

pub(crate) use apply_sharing::{ApplySharing, SharingApplied};
pub(crate) use bind_vfio::BindVfio;
pub(crate) use check_allocation::CheckAllocation;
pub(crate) use create_devices::CreateDevices;
pub(crate) use load_checkpoint::LoadCheckpoint;
pub(crate) use record_completed::RecordPrepareCompleted;
pub(crate) use record_started::RecordPrepareStarted;
pub(crate) use take_node_lock::TakeNodeLock;
pub(crate) use write_cdi_spec::WriteCdiSpec;
pub(crate) use write_vfio_payload::WriteVfioPayload;

/// One step of the pipeline.
pub(crate) trait PrepareStep: Sync {
    fn name(&self) -> &'static str;
    /// A stable kebab-case id: the fault points after the step and after its undo are named by it.
    fn id(&self) -> &'static str;
    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError>;
    /// Takes back what `run` did. Best effort: failures are logged, and what
    /// is left is found again by reconciliation.
    fn undo(&self, run: &mut PrepareRun<'_>);
}

/// The steps in their fixed order.
pub(crate) const PREPARE_STEPS: [&dyn PrepareStep; 10] = [
    &TakeNodeLock,
    &LoadCheckpoint,
    &CheckAllocation,
    &RecordPrepareStarted,
    &CreateDevices,
    &ApplySharing,
    &BindVfio,
    &WriteVfioPayload,
    &WriteCdiSpec,
    &RecordPrepareCompleted,
];

/// The state one prepare carries from step to step.
pub(crate) struct PrepareRun<'a> {
    pub config: &'a NodePrepareConfig,
    pub backend: &'a dyn VendorBackend,
    pub store: &'a CheckpointStore,
    pub request: &'a PrepareRequest,
    pub lock: Option<NodeLockGuard>,
    pub checkpoint: CheckpointData,
    /// What each device of the request needs beyond existing, by index; set by the checks.
    pub plans: Vec<DevicePlan>,
    /// MIG devices made by this run, by index into `request.devices`.
    pub created: Vec<(usize, PciAddress, MigInstanceRecord)>,
    /// Cards whose MIG mode this run switched (on for MIG, off for a whole card).
    pub mode_changed_on: Vec<PciAddress>,
    /// Cards where a MIG create was given up on (it did not return in time): it may still make
    /// its instance, so the claim's `PrepareStarted` record stays for its rollback to find it.
    pub mig_creates_abandoned: Vec<PciAddress>,
    /// Time slices set and MPS daemons started by this run.
    pub sharing_applied: Vec<SharingApplied>,
    /// Cards this run moved (or began to move) to vfio-pci.
    pub vfio_moved: Vec<VfioRecord>,
    /// CDI ids per device of the request, once the spec is written.
    pub cdi_device_ids: Vec<Vec<String>>,
    /// Set when the claim is prepared (now or earlier): the pipeline ends.
    pub outcome: Option<Vec<PreparedDevice>>,
}

impl<'a> PrepareRun<'a> {
    pub fn new(
        config: &'a NodePrepareConfig,
        backend: &'a dyn VendorBackend,
        store: &'a CheckpointStore,
        request: &'a PrepareRequest,
    ) -> Self {
        PrepareRun {
            config,
            backend,
            store,
            request,
            lock: None,
            checkpoint: CheckpointData::default(),
            plans: Vec::new(),
            created: Vec::new(),
            mode_changed_on: Vec::new(),
            mig_creates_abandoned: Vec::new(),
            sharing_applied: Vec::new(),
            vfio_moved: Vec::new(),
            cdi_device_ids: Vec::new(),
            outcome: None,
        }
    }

    /// The plan of device `index` (the default before the checks ran).
    pub fn plan(&self, index: usize) -> DevicePlan {
        self.plans.get(index).cloned().unwrap_or_default()
    }

    /// `namespace/name` of the claim being prepared.
    pub fn claim_label(&self) -> String {
        claim_label(&self.request.claim.namespace, &self.request.claim.name)
    }
}

/// Runs `steps` until one sets the outcome; on a failure undoes the steps
/// that ran, newest first, and returns the failure. A fault point follows
/// every step and every undo (`prepare/after/<id>`, `prepare/undo/<id>`).
pub(crate) fn run_steps(
    steps: &[&dyn PrepareStep],
    run: &mut PrepareRun<'_>,
) -> Result<Vec<PreparedDevice>, PrepareError> {
    for (index, step) in steps.iter().enumerate() {
        let ran = step.run(run);
        // A step that failed took back its own part; one that ran but whose fault point failed
        // is undone with the steps before it.
        let undo_to = if ran.is_ok() { index + 1 } else { index };
        if let Err(error) = ran.and_then(|()| fault_point(&format!("prepare/after/{}", step.id()))) {
            tracing::warn!(claim = %run.claim_label(), step = step.name(), %error, "prepare failed; undoing");
            undo_steps(steps.get(..undo_to).unwrap_or(steps), run);
            return Err(error);
        }
        if let Some(devices) = run.outcome.take() {
            return Ok(devices);
        }
    }
    Err(PrepareError::refused(
        &run.claim_label(),
        "the prepare pipeline ended without recording the claim as prepared",
    ))
}

fn undo_steps(done: &[&dyn PrepareStep], run: &mut PrepareRun<'_>) {
    for step in done.iter().rev() {
        step.undo(run);
        // A failure injected here has nothing left to stop: the undo goes on.
        let _ = fault_point(&format!("prepare/undo/{}", step.id()));
    }
}
