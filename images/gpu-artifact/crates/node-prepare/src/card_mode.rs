//! When the node may change a card's MIG mode (invariant 4: only for a real
//! claim, and only on an idle card) and how: on for the first MIG claim, off
//! for a whole-card claim, back off when the last MIG claim leaves.

use gpu_vendor::{MigMode, MigState, PciAddress, VendorBackend, VendorError};

use crate::checkpoint::CheckpointData;
use crate::error::PrepareError;

/// MIG is on, or will be once the card is idle.
fn mig_on(mode: MigMode) -> bool {
    mode.current.is_enabled() || mode.pending.is_enabled()
}

/// Makes sure MIG is on for a MIG device of `claim`. Turns it on only when
/// nothing else is on the card (`card_has_other_allocation`) and no process
/// runs. Returns whether this call turned it on (the undo turns it back off).
pub(crate) fn enable_for_mig(
    backend: &dyn VendorBackend,
    card: &PciAddress,
    claim: &str,
    device: &str,
    card_has_other_allocation: bool,
) -> Result<bool, PrepareError> {
    let vendor = |source| PrepareError::Vendor {
        claim: claim.to_owned(),
        device: device.to_owned(),
        source,
    };
    let refused = |reason: String| PrepareError::refused(claim, format!("device {device}: {reason}"));
    let mode = backend
        .mig_mode(card)
        .map_err(vendor)?
        .ok_or_else(|| refused(format!("card {card} does not support MIG")))?;
    if mode.current.is_enabled() {
        if !mode.pending.is_enabled() {
            // Someone asked for MIG off; a MIG claim needs it to stay on.
            backend.set_mig_mode(card, true).map_err(vendor)?;
        }
        return Ok(false);
    }
    if card_has_other_allocation {
        return Err(refused(format!(
            "card {card} has MIG off and another allocation; MIG mode is enabled only on a free card"
        )));
    }
    let processes = backend.running_processes(card).map_err(vendor)?;
    if !processes.is_empty() {
        let pids: Vec<String> = processes.iter().map(|p| p.pid.to_string()).collect();
        return Err(refused(format!(
            "card {card} runs processes (pids {}); MIG mode is enabled only on an idle card",
            pids.join(", ")
        )));
    }
    match backend.set_mig_mode(card, true) {
        Ok(mode) if mode.current == MigState::Enabled => Ok(true),
        Ok(_) | Err(VendorError::InUse { .. }) => {
            // Do not leave a pending change behind that nobody asked to keep.
            let _ = backend.set_mig_mode(card, false);
            Err(refused(format!(
                "card {card} became busy while MIG mode was being enabled"
            )))
        }
        Err(source) => Err(vendor(source)),
    }
}

/// Makes sure MIG is off for a whole-card device. Turns it off when MIG is on
/// with no instances and no processes (the checks already refused a card with
/// a prepared MIG claim); refuses otherwise.
pub(crate) fn disable_for_physical(
    backend: &dyn VendorBackend,
    card: &PciAddress,
    claim: &str,
    device: &str,
) -> Result<(), PrepareError> {
    let vendor = |source| PrepareError::Vendor {
        claim: claim.to_owned(),
        device: device.to_owned(),
        source,
    };
    let refused = |reason: String| PrepareError::refused(claim, format!("device {device}: {reason}"));
    match backend.mig_mode(card).map_err(vendor)? {
        Some(mode) if mig_on(mode) => {}
        _ => return Ok(()),
    }
    let instances = backend.mig_instances(card).map_err(vendor)?;
    if !instances.is_empty() {
        return Err(refused(format!(
            "card {card} is in MIG mode with {} MIG instances that no claim records; \
             the whole card is usable only with MIG off",
            instances.len()
        )));
    }
    if !backend.running_processes(card).map_err(vendor)?.is_empty() {
        return Err(refused(format!(
            "card {card} is in MIG mode and runs processes; MIG mode is turned off only on an idle card"
        )));
    }
    let mode = backend.set_mig_mode(card, false).map_err(vendor)?;
    if mode.current.is_enabled() {
        return Err(refused(format!("card {card} kept MIG mode on")));
    }
    tracing::info!(%card, %claim, "turned MIG mode off for a whole-card allocation");
    Ok(())
}

/// Turns MIG off when the card needs it no more: no MIG instance, no MIG
/// claim recorded (other than `leaving_uid`), no process. Returns whether it
/// was turned off.
pub(crate) fn disable_if_unused(
    backend: &dyn VendorBackend,
    card: &PciAddress,
    checkpoint: &CheckpointData,
    leaving_uid: Option<&str>,
) -> Result<bool, VendorError> {
    match backend.mig_mode(card)? {
        Some(mode) if mig_on(mode) => {}
        _ => return Ok(false),
    }
    if checkpoint.has_mig_claim_on(card, leaving_uid)
        || !backend.mig_instances(card)?.is_empty()
        || !backend.running_processes(card)?.is_empty()
    {
        return Ok(false);
    }
    match backend.set_mig_mode(card, false) {
        Ok(mode) if !mode.current.is_enabled() => {
            tracing::info!(%card, "turned MIG mode off: no MIG claim is left on the card");
            Ok(true)
        }
        Ok(_) | Err(VendorError::InUse { .. }) => {
            // Became busy in between: leave MIG on rather than a pending change.
            let _ = backend.set_mig_mode(card, true);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
