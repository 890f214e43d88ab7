//! Server-side apply of the handler's fields (`capabilities`, `currentState.nvidia`,
//! `HardwareHealthy`) with field manager `gpu-handler`, only when they differ from what is stored.
//! A field the handler no longer wants is left out of the apply, which removes it because the
//! handler owns it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use gpu_api::PhysicalGPU;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::desired::HandlerStatus;
use crate::{FIELD_MANAGER, HARDWARE_HEALTHY};

pub struct StatusWriter {
    gpus: Api<PhysicalGPU>,
    writes: AtomicU64,
    /// Objects whose stored status still differed after our apply (someone else owns a field the
    /// handler wants gone), with what we wanted: not retried until the wish changes, so a conflict
    /// costs one write instead of a write loop.
    unreconcilable: Mutex<HashMap<String, HandlerStatus>>,
}

impl StatusWriter {
    pub fn new(gpus: Api<PhysicalGPU>) -> Self {
        Self {
            gpus,
            writes: AtomicU64::new(0),
            unreconcilable: Mutex::default(),
        }
    }

    /// Write requests made so far (the steady-state goal is that this stops moving).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Brings `have`'s handler fields to `want`; returns whether it wrote.
    pub async fn sync(&self, have: &PhysicalGPU, want: &HandlerStatus) -> anyhow::Result<bool> {
        let name = have.name_any();
        if !differs(have, want) {
            self.unreconcilable().remove(&name);
            return Ok(false);
        }
        if self.unreconcilable().get(&name) == Some(want) {
            return Ok(false);
        }
        let patch = apply_body(&name, have, want);
        self.writes.fetch_add(1, Ordering::Relaxed);
        let stored = self
            .gpus
            .patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
            .await
            .with_context(|| format!("applying the handler's status of PhysicalGPU {name}"))?;
        if differs(&stored, want) {
            tracing::warn!(
                physicalgpu = %name,
                managers = ?stored.managed_fields().iter().filter_map(|m| m.manager.clone()).collect::<Vec<_>>(),
                "after applying, the status still differs: another field manager holds a field the handler wants; not retrying until something changes"
            );
            self.unreconcilable().insert(name, want.clone());
        }
        Ok(true)
    }

    fn unreconcilable(&self) -> std::sync::MutexGuard<'_, HashMap<String, HandlerStatus>> {
        self.unreconcilable.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// True when a handler-owned field differs (conditions by status, reason and message: a timestamp
/// alone is never worth a write).
pub fn differs(have: &PhysicalGPU, want: &HandlerStatus) -> bool {
    let status = have.status.clone().unwrap_or_default();
    let nvidia = status.current_state.as_ref().and_then(|c| c.nvidia.as_ref());
    let condition = stored_condition(have);
    status.capabilities != want.capabilities
        || nvidia != want.nvidia.as_ref()
        || !condition.is_some_and(|c| {
            c.status == want.healthy.status && c.reason == want.healthy.reason && c.message == want.healthy.message
        })
}

fn stored_condition(gpu: &PhysicalGPU) -> Option<&Condition> {
    gpu.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == HARDWARE_HEALTHY)
}

/// The whole set of fields the handler owns: what is absent here is removed.
fn apply_body(name: &str, have: &PhysicalGPU, want: &HandlerStatus) -> serde_json::Value {
    let transition = match stored_condition(have) {
        Some(c) if c.status == want.healthy.status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let condition = Condition {
        type_: HARDWARE_HEALTHY.into(),
        status: want.healthy.status.into(),
        reason: want.healthy.reason.into(),
        message: want.healthy.message.clone(),
        last_transition_time: transition,
        observed_generation: have.metadata.generation,
    };
    let mut status = json!({"conditions": [condition]});
    if let Some(capabilities) = &want.capabilities {
        status["capabilities"] = json!(capabilities);
    }
    if let Some(nvidia) = &want.nvidia {
        status["currentState"] = json!({"nvidia": nvidia});
    }
    json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "PhysicalGPU",
        "metadata": {"name": name},
        "status": status,
    })
}
