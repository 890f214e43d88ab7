//! When the node may change a card's MIG mode, and how it remembers that it did (invariant 4:
//! only for a real claim, only on an idle card, and undone only where the checkpoint says the
//! node did it). Every switch is recorded in the checkpoint *before* it is made, so a crash right
//! after it leaves a record for reconciliation; a record the card disproves (MIG already back in
//! the recorded state) is simply dropped.
//!
//! - A MIG claim on a card with MIG off turns MIG on; the card joins `mig_enabled_by_node` and
//!   goes back to MIG off when its last MIG claim leaves.
//! - A whole-card claim on a card in MIG mode (an admin's, with no instance) turns MIG off; the
//!   card joins `mig_disabled_by_node` and MIG goes back on when its last whole-card claim leaves.
//! - Every other card's mode is never touched: an admin's MIG layout stays.
//!
//! A change the card cannot apply yet (another client holds it: DCGM, a CUDA process) is left
//! pending by the driver; the prepare then fails with [`PrepareError::MigModePending`] naming the
//! holders as NVML reports them, and the change is taken back rather than left pending.

use gpu_vendor::{GpuProcess, MigMode, PciAddress, VendorBackend, VendorError};

use crate::checkpoint::{CheckpointData, CheckpointStore};
use crate::error::PrepareError;

/// MIG is on, or will be once the card is idle.
pub(crate) fn mig_on(mode: MigMode) -> bool {
    mode.current.is_enabled() || mode.pending.is_enabled()
}

/// The card and the checkpoint a mode change is made for.
pub(crate) struct ModeChange<'a> {
    pub backend: &'a dyn VendorBackend,
    pub store: &'a CheckpointStore,
    pub checkpoint: &'a mut CheckpointData,
    pub card: &'a PciAddress,
    /// `namespace/name` of the claim, for messages.
    pub claim: &'a str,
    pub device: &'a str,
}

impl ModeChange<'_> {
    fn vendor(&self) -> impl Fn(VendorError) -> PrepareError + '_ {
        |source| PrepareError::Vendor {
            claim: self.claim.to_owned(),
            device: self.device.to_owned(),
            source,
        }
    }

    fn refused(&self, reason: String) -> PrepareError {
        PrepareError::refused(self.claim, format!("device {}: {reason}", self.device))
    }

    /// Makes sure MIG is on for a MIG device. Turns it on only when nothing else is on the card
    /// (`card_has_other_allocation`) and no process runs. Returns whether it turned it on.
    pub fn enable_for_mig(&mut self, card_has_other_allocation: bool) -> Result<bool, PrepareError> {
        let card = *self.card;
        let mode = self
            .backend
            .mig_mode(&card)
            .map_err(self.vendor())?
            .ok_or_else(|| self.refused(format!("card {card} does not support MIG")))?;
        if mode.current.is_enabled() {
            if !mode.pending.is_enabled() {
                // Someone asked for MIG off; a MIG claim needs it to stay on.
                self.backend.set_mig_mode(&card, true).map_err(self.vendor())?;
            }
            return Ok(false);
        }
        if card_has_other_allocation {
            return Err(self.refused(format!(
                "card {card} has MIG off and another allocation; MIG mode is enabled only on a free card"
            )));
        }
        let processes = self.backend.running_processes(&card).map_err(self.vendor())?;
        if !processes.is_empty() {
            return Err(self.refused(format!(
                "card {card} runs processes ({}); MIG mode is enabled only on an idle card",
                describe_holders(&processes)
            )));
        }
        let before = self.checkpoint.clone();
        // Back on for a card whose MIG the node had turned off: the admin's mode, not the node's.
        if !self.checkpoint.mig_disabled_by_node.remove(&card) {
            self.checkpoint.mig_enabled_by_node.insert(card);
        }
        self.store.save(self.checkpoint)?;
        self.switch(true, before)?;
        Ok(true)
    }

    /// Makes sure MIG is off for a whole-card device. Turns it off when MIG is on with no
    /// instances and no processes (the checks already refused a card with a prepared MIG claim);
    /// refuses otherwise. Returns whether it turned it off.
    pub fn disable_for_whole_card(&mut self) -> Result<bool, PrepareError> {
        let card = *self.card;
        match self.backend.mig_mode(&card).map_err(self.vendor())? {
            Some(mode) if mig_on(mode) => {}
            _ => return Ok(false),
        }
        let instances = self.backend.mig_instances(&card).map_err(self.vendor())?;
        if !instances.is_empty() {
            return Err(self.refused(format!(
                "card {card} is in MIG mode with {} MIG instances that no claim records; \
                 the whole card is usable only with MIG off",
                instances.len()
            )));
        }
        let processes = self.backend.running_processes(&card).map_err(self.vendor())?;
        if !processes.is_empty() {
            return Err(self.refused(format!(
                "card {card} is in MIG mode and runs processes ({}); MIG mode is turned off only on an idle card",
                describe_holders(&processes)
            )));
        }
        let before = self.checkpoint.clone();
        // Off again on a card the node had turned on: back to where it was, nothing to restore later.
        if !self.checkpoint.mig_enabled_by_node.remove(&card) {
            self.checkpoint.mig_disabled_by_node.insert(card);
        }
        self.store.save(self.checkpoint)?;
        self.switch(false, before)?;
        tracing::info!(%card, claim = %self.claim, "turned MIG mode off for a whole-card allocation");
        Ok(true)
    }

    /// Switches the mode; a change left pending is taken back, the records go back to `before`,
    /// and the holders are reported.
    fn switch(&mut self, enable: bool, before: CheckpointData) -> Result<(), PrepareError> {
        let card = *self.card;
        let applied = match self.backend.set_mig_mode(&card, enable) {
            Ok(mode) => mode.current.is_enabled() == enable,
            Err(VendorError::InUse { .. }) => false,
            Err(source) => return Err(self.vendor()(source)),
        };
        if applied {
            return Ok(());
        }
        // Do not leave a pending change behind that nobody asked to keep.
        let _ = self.backend.set_mig_mode(&card, !enable);
        *self.checkpoint = before;
        let _ = self.store.save(self.checkpoint);
        let holders = self.backend.running_processes(&card).unwrap_or_default();
        Err(PrepareError::MigModePending {
            claim: self.claim.to_owned(),
            device: self.device.to_owned(),
            card: card.to_string(),
            enable,
            holders: describe_holders(&holders),
        })
    }
}

/// Drops the record of a switch to `enabled` that did not happen.
fn forget_switch(checkpoint: &mut CheckpointData, card: &PciAddress, enabled: bool) {
    if enabled {
        checkpoint.mig_enabled_by_node.remove(card);
    } else {
        checkpoint.mig_disabled_by_node.remove(card);
    }
}

/// `pid 4242 (python3), pid 77`, or what NVML cannot show.
pub(crate) fn describe_holders(processes: &[GpuProcess]) -> String {
    if processes.is_empty() {
        return "NVML lists no process with a context on it, so a client without one holds it open \
                (DCGM's nv-hostengine or nvidia-persistenced, say)"
            .to_owned();
    }
    let listed: Vec<String> = processes
        .iter()
        .map(|process| match &process.name {
            Some(name) => format!("pid {} ({name})", process.pid),
            None => format!("pid {}", process.pid),
        })
        .collect();
    format!("NVML lists {}", listed.join(", "))
}

/// Gives a card back the MIG mode it had before this node changed it, once nothing recorded
/// needs the change (`leaving_uid` is on its way out). Returns whether the mode was switched.
pub(crate) fn restore_if_unneeded(
    backend: &dyn VendorBackend,
    store: &CheckpointStore,
    checkpoint: &mut CheckpointData,
    card: &PciAddress,
    leaving_uid: Option<&str>,
) -> Result<bool, PrepareError> {
    let card_error = |source| PrepareError::Card {
        card: card.to_string(),
        source,
    };
    let enabled_by_us = checkpoint.mig_enabled_by_node.contains(card);
    let disabled_by_us = checkpoint.mig_disabled_by_node.contains(card);
    if !enabled_by_us && !disabled_by_us {
        return Ok(false);
    }
    let Some(mode) = backend.mig_mode(card).map_err(card_error)? else {
        return Ok(false);
    };
    // The record the card disproves (the mode is back already, or someone changed it) goes.
    let wanted_on = disabled_by_us;
    if mig_on(mode) == wanted_on {
        forget_switch(checkpoint, card, !wanted_on);
        store.save(checkpoint)?;
        return Ok(false);
    }
    let still_needed = if enabled_by_us {
        checkpoint.has_mig_claim_on(card, leaving_uid)
    } else {
        checkpoint.has_whole_card_claim_on(card, leaving_uid)
    };
    if still_needed
        || !backend.mig_instances(card).map_err(card_error)?.is_empty()
        || !backend.running_processes(card).map_err(card_error)?.is_empty()
    {
        return Ok(false);
    }
    match backend.set_mig_mode(card, wanted_on) {
        Ok(mode) if mode.current.is_enabled() == wanted_on => {
            forget_switch(checkpoint, card, !wanted_on);
            store.save(checkpoint)?;
            tracing::info!(%card, mig = wanted_on, "gave the card back the MIG mode it had before the node changed it");
            Ok(true)
        }
        Ok(_) | Err(VendorError::InUse { .. }) => {
            // Became busy in between: keep the record and the mode; the next unprepare or start retries.
            let _ = backend.set_mig_mode(card, !wanted_on);
            Ok(false)
        }
        Err(source) => Err(card_error(source)),
    }
}
