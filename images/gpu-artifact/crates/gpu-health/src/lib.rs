//! The health model of a GPU, vendor-neutral where it can be (the Xid vocabulary is NVIDIA's, as
//! in the vendor port):
//! - [`XidPolicy`]: Xid classes critical / application / ignored and the recoverable ones, from
//!   the ModuleConfig; [`HealthPolicy`] adds the quiet period and NoExecute;
//! - [`Cause`]: what makes a card unhealthy (critical) or worth a note (informational), with the
//!   administrator's words, the condition reason and the device taint;
//! - [`CardRecord`]: what is remembered per card (critical Xids, a requested reset, first-seen
//!   times, the last clear) and the recovery rules: a GPU reset (the driver stops asking for one),
//!   a quiet period for recoverable Xids, an administrator's clear (annotation
//!   [`CLEAR_ANNOTATION`] with a new value), another card at the address; a reboot clears the
//!   whole [`HealthLedger`];
//! - [`assess`]: the card's active causes and the one message every output carries.
//!
//! Faults the card reports on every query (lost, uncorrectable memory errors, row remapping, the
//! recovery action) last exactly as long as the card says so; only Xids, which NVML reports once,
//! are remembered. The ledger file is the only I/O here; everything else is plain data in, plain
//! data out, with the clock passed in.

mod assessment;
mod cause;
mod ledger;
mod policy;
mod record;
mod xid_names;
mod xid_policy;

pub use assessment::{ActiveCause, CardHealth, HealthTaint, assess, timestamp};
pub use cause::{Cause, Severity, TAINT_DOMAIN, TaintSpec};
pub use ledger::{HealthLedger, LedgerError};
pub use policy::{DEFAULT_QUIET_PERIOD, HealthPolicy, format_duration};
pub use record::{CardRecord, LatchedXid, Observation, Recovery};
pub use xid_names::{xid_description, xid_label};
pub use xid_policy::{DEFAULT_APPLICATION_XIDS, DEFAULT_RECOVERABLE_XIDS, XidClass, XidPolicy};

/// The PhysicalGPU annotation an administrator sets (to any new value, e.g. the current time) to
/// clear the Xids kept for the card: `kubectl annotate physicalgpu <name>
/// gpu.deckhouse.io/clear-health="$(date -u +%FT%TZ)" --overwrite`.
pub const CLEAR_ANNOTATION: &str = "gpu.deckhouse.io/clear-health";
