//! Test-only crash points. The end-to-end suite kills the handler in the
//! middle of a prepare to prove that reconciliation leaves nothing behind;
//! in production the variable is never set and this is a no-op.

/// The environment variable naming the point at which the process aborts.
pub const FAULT_POINT_ENV: &str = "GPU_HANDLER_FAULT_POINT";

/// Aborts the process (no unwinding, no destructors: like a kill) when
/// `GPU_HANDLER_FAULT_POINT` names `point`. Points: `after-prepare-started`
/// (step 4 recorded), `after-devices-created` (step 5 done),
/// `after-sharing-applied` (step 6 done: time slice set or MPS daemon
/// started), `after-vfio-function-moved` (step 7, after each PCI function
/// moved to vfio-pci).
pub(crate) fn fault_point(point: &str) {
    if std::env::var(FAULT_POINT_ENV).is_ok_and(|wanted| wanted == point) {
        std::process::abort();
    }
}
