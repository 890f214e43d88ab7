//! Step 6: make the card shareable the way its shares ask. TimeSlicing: the
//! card's first share sets its time slice. MPS: the card's first share
//! starts its control daemon. Later shares find the card ready (the checks
//! made sure they ask for the same).

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{SharingStrategy, TimeSliceInterval};

use super::{PrepareRun, PrepareStep};
use crate::error::PrepareError;
use crate::mps_daemon::{start_mps_daemon, stop_mps_daemon};
use crate::time_slice::set_time_slice;

/// Something this run did to a card for its shares, undone on failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SharingApplied {
    TimeSlice { uuid: String },
    MpsDaemon { card: String },
}

pub(crate) struct ApplySharing;

impl PrepareStep for ApplySharing {
    fn name(&self) -> &'static str {
        "apply the card's sharing"
    }

    fn id(&self) -> &'static str {
        "apply-sharing"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        if let Err(error) = apply_all(run) {
            self.undo(run);
            return Err(error);
        }
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        for applied in run.sharing_applied.drain(..).rev() {
            let undone = match &applied {
                SharingApplied::TimeSlice { uuid } => set_time_slice(run.config, uuid, TimeSliceInterval::Default),
                SharingApplied::MpsDaemon { card } => stop_mps_daemon(run.config, card).map(|_| ()),
            };
            if let Err(error) = undone {
                tracing::warn!(?applied, %error, "cannot take back the sharing of a failed prepare; reconciliation will");
            }
        }
    }
}

fn apply_all(run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
    let own_uid = run.request.claim.uid.as_str();
    for (index, device) in run.request.devices.iter().enumerate() {
        let Some(sharing) = run.plan(index).sharing else {
            continue;
        };
        let OfferedDevice::SharedPhysical { pci_address, uuid, .. } = &device.target else {
            continue;
        };
        let card = pci_address.to_string();
        match sharing.strategy {
            SharingStrategy::TimeSlicing => {
                let first_share = run
                    .checkpoint
                    .other_shares_on_card(pci_address, own_uid)
                    .next()
                    .is_none();
                let done_by_this_run = run
                    .sharing_applied
                    .contains(&SharingApplied::TimeSlice { uuid: uuid.clone() });
                if first_share && !done_by_this_run {
                    set_time_slice(run.config, uuid, sharing.interval.unwrap_or_default())?;
                    run.sharing_applied
                        .push(SharingApplied::TimeSlice { uuid: uuid.clone() });
                }
            }
            SharingStrategy::Mps => {
                let first_share = run
                    .checkpoint
                    .other_shares_on_card(pci_address, own_uid)
                    .next()
                    .is_none();
                // A daemon left by shares that are gone (a crash in their teardown) is stopped
                // first: its shared memory is theirs, never the next tenant's.
                if first_share
                    && !run
                        .sharing_applied
                        .contains(&SharingApplied::MpsDaemon { card: card.clone() })
                {
                    stop_mps_daemon(run.config, &card)?;
                }
                // A daemon started again for the card's other shares is theirs, not this run's to stop.
                if start_mps_daemon(run.config, &card, uuid)? && first_share {
                    run.sharing_applied.push(SharingApplied::MpsDaemon { card });
                }
            }
            SharingStrategy::Exclusive => {}
        }
    }
    Ok(())
}
