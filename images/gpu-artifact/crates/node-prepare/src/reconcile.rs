//! Reconciliation at start: make the cards match the checkpoint. Claims a
//! crash left `PrepareStarted` are rolled back (the kubelet will prepare them
//! again; a card half-moved to vfio-pci goes back to its drivers), MPS
//! daemons of cards without a recorded MPS share are stopped, MIG devices no
//! completed claim records are destroyed, and cards in MIG mode that no claim
//! needs go back to MIG off.

use std::collections::BTreeSet;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::PciAddress;

use crate::card_mode::disable_if_unused;
use crate::checkpoint::{CheckpointData, ClaimState};
use crate::error::PrepareError;
use crate::mps_daemon::{cards_with_daemon_dirs, stop_mps_daemon};
use crate::node_lock;
use crate::preparer::NodePreparer;
use crate::teardown::tear_down_claim;

/// What reconciliation did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Claims recorded under an earlier boot id, forgotten.
    pub claims_dropped_after_reboot: usize,
    /// `PrepareStarted` claims whose side effects were removed.
    pub started_claims_rolled_back: usize,
    /// MIG devices that no `PrepareCompleted` claim records, destroyed.
    pub unknown_mig_devices_destroyed: usize,
    /// Cards turned back to MIG off.
    pub cards_mig_disabled: usize,
    /// MPS control daemons of cards that no completed claim shares with MPS, stopped.
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
        self.stop_unneeded_mps_daemons(&data, &mut report);
        match self.backend.devices() {
            Ok(cards) => {
                for card in cards {
                    if let Err(error) = self.reconcile_card(&card, &data, &mut report) {
                        report.failures.push(error.to_string());
                    }
                }
            }
            Err(source) => report.failures.push(format!("cannot list the GPUs: {source}")),
        }
        tracing::info!(?report, "reconciled the node with the checkpoint");
        Ok(report)
    }

    fn roll_back_started_claims(
        &self,
        data: &mut CheckpointData,
        report: &mut ReconcileReport,
    ) -> Result<(), PrepareError> {
        let started: Vec<_> = data
            .claims
            .iter()
            .filter(|(_, claim)| claim.state == ClaimState::PrepareStarted)
            .map(|(uid, claim)| (uid.clone(), claim.clone()))
            .collect();
        for (uid, claim) in started {
            match tear_down_claim(&self.config, self.backend.as_ref(), data, &uid, &claim) {
                Ok(()) => {
                    tracing::warn!(claim = %claim.label(), "rolled back a prepare that did not complete");
                    data.claims.remove(&uid);
                    self.store.save(data)?;
                    report.started_claims_rolled_back += 1;
                }
                Err(error) => report.failures.push(error.to_string()),
            }
        }
        Ok(())
    }

    fn stop_unneeded_mps_daemons(&self, data: &CheckpointData, report: &mut ReconcileReport) {
        for card in cards_with_daemon_dirs(&self.config) {
            let needed = data.claims.values().any(|claim| {
                claim.state == ClaimState::PrepareCompleted
                    && claim.devices.iter().any(|device| {
                        device.target.pci_address().to_string() == card
                            && device
                                .sharing
                                .as_ref()
                                .is_some_and(|s| s.strategy == SharingStrategy::Mps)
                    })
            });
            if needed {
                continue;
            }
            match stop_mps_daemon(&self.config, &card) {
                Ok(_) => {
                    tracing::warn!(%card, "stopped an MPS control daemon that no prepared claim needs");
                    report.mps_daemons_stopped += 1;
                }
                Err(error) => report.failures.push(error.to_string()),
            }
        }
    }

    fn reconcile_card(
        &self,
        card: &PciAddress,
        data: &CheckpointData,
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
        // Instances are known by GPU instance id and placement: ids are
        // reused after a destroy, a placement is not shared while recorded.
        let recorded: BTreeSet<(u32, u32, u32)> = data
            .devices_on_card(card)
            .filter(|(_, claim, _)| claim.state == ClaimState::PrepareCompleted)
            .filter_map(|(_, _, device)| match (&device.target, &device.mig_instance) {
                (OfferedDevice::Mig { placement, .. }, Some(record)) => {
                    Some((record.gpu_instance_id, placement.start, placement.size))
                }
                _ => None,
            })
            .collect();
        for instance in backend.mig_instances(card).map_err(card_error)? {
            let key = (
                instance.gpu_instance_id,
                instance.placement.start,
                instance.placement.size,
            );
            if recorded.contains(&key) {
                continue;
            }
            match backend.destroy_mig_device(card, instance.gpu_instance_id) {
                Ok(()) => {
                    tracing::warn!(
                        %card, gpu_instance = instance.gpu_instance_id, profile = %instance.profile_name,
                        placement_start = instance.placement.start,
                        "destroyed a MIG device that no prepared claim records"
                    );
                    report.unknown_mig_devices_destroyed += 1;
                }
                Err(source) => report.failures.push(card_error(source).to_string()),
            }
        }
        if disable_if_unused(backend, card, data, None).map_err(card_error)? {
            report.cards_mig_disabled += 1;
        }
        Ok(())
    }
}
