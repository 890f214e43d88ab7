//! The node's upkeep beside the kubelet's calls: start-up reconciliation, the periodic upkeep (claims
//! failed prepares left behind, MPS daemon supervision),
//! and reading back what the checkpoint holds (metrics, card holdings, a corrupt checkpoint told).

use std::time::Duration;

use node_prepare::{NodePreparer, PrepareError, ReconcileReport};

use super::NodeClaims;
use crate::failure::ClaimFailure;
use crate::holdings::card_holdings;
use crate::node_side::{CHECKPOINT_CORRUPT, FOREIGN_MIG_INSTANCES, MPS_DAEMON_RESTARTED};

impl NodeClaims {
    /// Waits for the vendor library and reconciles the node: claims a crash left half-prepared are
    /// rolled back, MIG instances nobody recorded are destroyed.
    pub async fn reconcile_when_ready(&self) {
        let mut backend = self.links.backend.clone();
        if backend.wait_for(Option::is_some).await.is_err() {
            return;
        }
        if let Err(failure) = self.ensure_reconciled().await {
            tracing::warn!(error = %failure.message, "start-up reconciliation failed; it runs again before the next prepare");
        }
    }

    pub(super) async fn ensure_reconciled(&self) -> Result<(), ClaimFailure> {
        self.reconciled
            .get_or_try_init(|| async {
                // A handler killed while DCGM was paused for it leaves the label behind.
                self.node.resume_dcgm().await;
                let preparer = self.preparer()?;
                let report = self.run_pipeline(preparer, NodePreparer::reconcile).await?;
                tracing::info!(report = ?report, "start-up reconciliation done");
                self.tell_reconciled(&report).await;
                self.links.after_change.notify_one();
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// Node Events for what reconciliation found that a human should know.
    async fn tell_reconciled(&self, report: &ReconcileReport) {
        self.metrics
            .set_foreign_mig_instances(report.foreign_mig_instances.len());
        if !report.foreign_mig_instances.is_empty() {
            let note = format!(
                "MIG instances no prepared claim records were kept: {}. The node destroys only instances it \
                 made (its checkpoint is the record); these are an admin's, or a Pod's whose checkpoint was lost. \
                 Remove them with nvidia-smi once nothing uses them; until then their placements cannot be prepared.",
                report.foreign_mig_instances.join("; ")
            );
            self.node.warn(FOREIGN_MIG_INSTANCES, "Reconcile", note).await;
        }
        self.tell_mps_restarted(&report.mps_daemons_restarted).await;
    }

    async fn tell_mps_restarted(&self, cards: &[String]) {
        if cards.is_empty() {
            return;
        }
        self.metrics.count_mps_restarts(cards.len());
        let note = format!(
            "The MPS control daemon of card(s) {} was not running while MPS shares are prepared on them; it was \
             started again (running clients reconnect to it)",
            cards.join(", ")
        );
        self.node.warn(MPS_DAEMON_RESTARTED, "SuperviseMps", note).await;
    }

    /// Every `interval`, the node's upkeep: claims a failed prepare left `PrepareStarted` (a MIG
    /// create given up on, say) are rolled back, the MPS daemons that prepared shares need and that
    /// died are started again, and the cards' holdings are refreshed (MIG instances made or removed
    /// behind the node's back). Runs until the task is dropped; skips a round while the library is
    /// not loaded or the node is busy (the node lock is not waited for).
    pub async fn keep_up(&self, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            if self.reconciled.get().is_none() {
                continue;
            }
            let Ok(preparer) = self.preparer() else { continue };
            // Instances an admin makes or removes between prepares change what may be offered.
            if let Ok(reader) = self.preparer() {
                self.read_back(reader).await;
            }
            match tokio::task::spawn_blocking(move || preparer.upkeep()).await {
                Ok(Ok(report)) => {
                    if report.started_claims_rolled_back > 0 {
                        tracing::info!(
                            claims = report.started_claims_rolled_back,
                            "rolled back claims failed prepares left behind"
                        );
                        self.links.after_change.notify_one();
                    }
                    self.tell_mps_restarted(&report.mps_daemons_restarted).await;
                }
                Ok(Err(PrepareError::LockTimeout { .. })) => {}
                Ok(Err(error)) => tracing::warn!(%error, "the node's upkeep failed; trying again next round"),
                Err(panic) => tracing::warn!(%panic, "the node's upkeep failed; trying again next round"),
            }
        }
    }

    /// Sets the checkpoint metrics and the cards' holdings (what publication withholds) from what
    /// the node holds now: its checkpoint, and the MIG instances no claim of it records.
    pub(super) async fn read_back(&self, preparer: NodePreparer) {
        let _serial = self.checkpoint_reads.lock().await;
        let read = tokio::task::spawn_blocking(move || {
            let claims = preparer.prepared_claims()?;
            let foreign = preparer.foreign_mig_placements().unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot list the MIG instances no claim records; offering as if there were none");
                Vec::new()
            });
            Ok::<_, PrepareError>((claims, foreign))
        })
        .await;
        match read {
            Ok(Ok((claims, foreign))) => {
                self.metrics.set_checkpoint(&claims);
                self.metrics.set_checkpoint_corrupt(false);
                let holdings = card_holdings(&claims, &foreign);
                self.links.holdings.send_if_modified(|current| {
                    let changed = *current != holdings;
                    *current = holdings;
                    changed
                });
            }
            Ok(Err(error @ PrepareError::CorruptCheckpoint { .. })) => self.tell_corrupt(&error).await,
            Ok(Err(error)) => tracing::warn!(%error, "the checkpoint metrics keep their last values"),
            Err(panic) => tracing::warn!(%panic, "the checkpoint metrics keep their last values"),
        }
    }

    /// A corrupt checkpoint stops every prepare and unprepare on the node: its own gauge (and
    /// alert) and a Node Event pointing at the recovery.
    async fn tell_corrupt(&self, error: &PrepareError) {
        tracing::error!(%error, "the node's checkpoint cannot be trusted; prepares and unprepares fail until it is recovered");
        self.metrics.set_checkpoint_corrupt(true);
        let note = format!(
            "{error}. Every prepare and unprepare on this node fails until an admin recovers it: see \
             \"A corrupt checkpoint\" in the module's documentation (cordon the node, keep the file, move it aside, \
             restart gpu-handler, clean up what the old claims left)"
        );
        self.node.warn(CHECKPOINT_CORRUPT, "ReadCheckpoint", note).await;
    }
}
