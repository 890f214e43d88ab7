//! Reconciliation at start: make the cards match the checkpoint, undoing only what the checkpoint
//! says the node did. Between the kubelet's calls, [`NodePreparer::upkeep`] repeats steps 1 and 2.
//!
//! 1. Claims a crash left `PrepareStarted` are rolled back (the kubelet prepares them again; a
//!    card half-moved to vfio-pci goes back to its drivers).
//! 2. MPS control daemons: a card with a prepared MPS share gets its daemon back if it died (it
//!    runs in the handler's container and dies with it); a daemon no share needs is stopped.
//! 3. Cards: a MIG mode the node switched and no claim needs any more is switched back. MIG
//!    instances no claim records are never destroyed: they are an admin's, or belong to Pods whose
//!    checkpoint was lost, and destroying them would take a running workload's device away. They
//!    are reported (`foreign_mig_instances`) for a human; a prepare that needs their placement is
//!    refused with a message naming them.

use std::collections::BTreeSet;

use dra_offers::OfferedDevice;
use gpu_vendor::{MigInstance, MigPlacement, PciAddress, VendorBackend, VendorError};

use crate::card_mode::restore_if_unneeded;
use crate::checkpoint::{CheckpointData, ClaimState};
use crate::error::PrepareError;
use crate::fault_point::fault_point;
use crate::mps_daemon::{MpsOutcome, supervise_mps_daemons};
use crate::node_lock;
use crate::preparer::NodePreparer;
use crate::teardown::{ROLLBACK, tear_down_claim};

/// The phases of reconciliation; a fault point follows each (`reconcile/after/<phase>`).
pub(crate) const RECONCILE_PHASES: [&str; 3] = ["roll-back-started-claims", "mps-daemons", "card-modes"];

/// What reconciliation did, for logs, Events and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Claims recorded under an earlier boot id, forgotten.
    pub claims_dropped_after_reboot: usize,
    /// `PrepareStarted` claims whose side effects were removed.
    pub started_claims_rolled_back: usize,
    /// MIG instances no claim records, kept: `<card>: <profile> (GPU instance <id>, memory slices <a>..<b>)`.
    pub foreign_mig_instances: Vec<String>,
    /// Cards given back the MIG mode they had before the node changed it.
    pub cards_mig_restored: usize,
    /// MPS control daemons of cards with a prepared MPS share that were not running, started again.
    pub mps_daemons_restarted: Vec<String>,
    /// MPS control daemons of cards that no prepared claim shares with MPS, stopped.
    pub mps_daemons_stopped: usize,
    /// What could not be done (the rest was still done).
    pub failures: Vec<String>,
}

impl NodePreparer {
    /// Reconciles the node with the checkpoint. Fails only when the lock or
    /// the checkpoint cannot be used; other failures are in the report.
    pub fn reconcile(&self) -> Result<ReconcileReport, PrepareError> {
        let _lock = node_lock::acquire(&self.config.lock_path(), self.config.lock_timeout)?;
        let (mut data, dropped) = self.load_current()?;
        let mut report = ReconcileReport {
            claims_dropped_after_reboot: dropped,
            ..ReconcileReport::default()
        };
        self.roll_back_started_claims(&mut data, &mut report)?;
        fault_point("reconcile/after/roll-back-started-claims")?;
        self.reconcile_mps_daemons(&data, &mut report);
        fault_point("reconcile/after/mps-daemons")?;
        match self.backend.devices() {
            Ok(cards) => {
                for card in cards {
                    if let Err(error) = self.reconcile_card(&card, &mut data, &mut report) {
                        report.failures.push(error.to_string());
                    }
                }
            }
            Err(source) => report.failures.push(format!("cannot list the GPUs: {source}")),
        }
        fault_point("reconcile/after/card-modes")?;
        tracing::info!(?report, "reconciled the node with the checkpoint");
        Ok(report)
    }

    /// The node's upkeep between the kubelet's calls, run periodically by the handler under the
    /// node lock (a busy node is looked at next time): claims left `PrepareStarted` are rolled back
    /// (no prepare runs while the lock is free, so each is one that failed and kept its record: a
    /// MIG create given up on, an undo that failed), and the MPS daemons prepared shares need and
    /// that died are started again.
    pub fn upkeep(&self) -> Result<ReconcileReport, PrepareError> {
        let _lock = node_lock::acquire(&self.config.lock_path(), std::time::Duration::ZERO)?;
        let mut data = self.store.load()?.data;
        let mut report = ReconcileReport::default();
        self.roll_back_started_claims(&mut data, &mut report)?;
        self.reconcile_mps_daemons(&data, &mut report);
        for failure in &report.failures {
            tracing::warn!(%failure, "node upkeep");
        }
        Ok(report)
    }

    fn roll_back_started_claims(
        &self,
        data: &mut CheckpointData,
        report: &mut ReconcileReport,
    ) -> Result<(), PrepareError> {
        let started: Vec<(String, String)> = data
            .claims
            .iter()
            .filter(|(_, claim)| claim.state == ClaimState::PrepareStarted)
            .map(|(uid, claim)| (uid.clone(), claim.label()))
            .collect();
        for (uid, label) in started {
            match tear_down_claim(&self.config, self.backend.as_ref(), &self.store, data, &uid, ROLLBACK) {
                Ok(()) => {
                    tracing::warn!(claim = %label, "rolled back a prepare that did not complete");
                    report.started_claims_rolled_back += 1;
                }
                Err(error @ PrepareError::Injected { .. }) => return Err(error),
                Err(error) => report.failures.push(error.to_string()),
            }
        }
        Ok(())
    }

    fn reconcile_mps_daemons(&self, data: &CheckpointData, report: &mut ReconcileReport) {
        for (card, outcome) in supervise_mps_daemons(&self.config, data) {
            match outcome {
                Ok(MpsOutcome::Restarted) => report.mps_daemons_restarted.push(card),
                Ok(MpsOutcome::Stopped) => report.mps_daemons_stopped += 1,
                Ok(MpsOutcome::Running) => {}
                Err(error) => report.failures.push(error.to_string()),
            }
        }
    }

    fn reconcile_card(
        &self,
        card: &PciAddress,
        data: &mut CheckpointData,
        report: &mut ReconcileReport,
    ) -> Result<(), PrepareError> {
        let backend = self.backend.as_ref();
        let card_error = |source| PrepareError::Card {
            card: card.to_string(),
            source,
        };
        if backend.mig_mode(card).map_err(card_error)?.is_none() {
            return Ok(());
        }
        if restore_if_unneeded(backend, &self.store, data, card, None)? {
            report.cards_mig_restored += 1;
        }
        for instance in foreign_instances(backend, card, data).map_err(card_error)? {
            let described = format!(
                "{card}: {} (GPU instance {}, memory slices {}..{})",
                instance.profile_name,
                instance.gpu_instance_id,
                instance.placement.start,
                instance.placement.end()
            );
            tracing::warn!(instance = %described, "a MIG instance no prepared claim records: kept (the node destroys only what it made)");
            report.foreign_mig_instances.push(described);
        }
        Ok(())
    }
}

impl NodePreparer {
    /// The placements of MIG instances on the node's cards that no claim of the checkpoint records,
    /// for publication to withhold what they take. Read without the node lock: a prepare in flight
    /// shows its instance as recorded or not yet made, either way correct enough for offers.
    pub fn foreign_mig_placements(&self) -> Result<Vec<(PciAddress, MigPlacement)>, PrepareError> {
        let data = self.store.load()?.data;
        let backend = self.backend.as_ref();
        let mut placements = Vec::new();
        for card in backend.devices().map_err(|source| PrepareError::Card {
            card: "*".into(),
            source,
        })? {
            let card_error = |source| PrepareError::Card {
                card: card.to_string(),
                source,
            };
            if backend.mig_mode(&card).map_err(card_error)?.is_none() {
                continue;
            }
            for instance in foreign_instances(backend, &card, &data).map_err(card_error)? {
                placements.push((card, instance.placement));
            }
        }
        Ok(placements)
    }
}

/// The MIG instances of `card` no claim of `data` records. Instances are known by GPU instance id
/// and placement: ids are reused after a destroy, a placement is not shared while recorded. An
/// instance of a claim still `PrepareStarted` whose creation was attempted at that placement is
/// its own, not foreign.
fn foreign_instances(
    backend: &dyn VendorBackend,
    card: &PciAddress,
    data: &CheckpointData,
) -> Result<Vec<MigInstance>, VendorError> {
    let mut recorded_ids = BTreeSet::new();
    let mut attempted = BTreeSet::new();
    for (_, _, device) in data.devices_on_card(card) {
        let OfferedDevice::Mig {
            placement, profile_id, ..
        } = &device.target
        else {
            continue;
        };
        if let Some(record) = &device.mig_instance {
            recorded_ids.insert((record.gpu_instance_id, placement.start, placement.size));
        } else if device.mig_create_attempted {
            attempted.insert((*profile_id, placement.start, placement.size));
        }
    }
    Ok(backend
        .mig_instances(card)?
        .into_iter()
        .filter(|instance| {
            let (start, size) = (instance.placement.start, instance.placement.size);
            !recorded_ids.contains(&(instance.gpu_instance_id, start, size))
                && !attempted.contains(&(instance.profile_id, start, size))
        })
        .collect())
}
