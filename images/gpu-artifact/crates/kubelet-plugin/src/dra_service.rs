//! The DRA service: hands every claim of a kubelet call to the [`ClaimPreparer`] and answers with
//! one entry per claim. A claim's failure is that claim's `error` string, never a gRPC error for
//! the whole call: the kubelet would drop the answers of the other claims.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;

use crate::preparer::{ClaimPreparer, ClaimRef, PreparedDevice};

/// Which DRA API a call came through; only for logs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DraApi {
    V1,
    V1beta1,
}

impl std::fmt::Display for DraApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DraApi::V1 => "v1",
            DraApi::V1beta1 => "v1beta1",
        })
    }
}

/// The version-independent service both generated DRA servers delegate to.
pub(crate) struct DraService<P> {
    preparer: Arc<P>,
}

impl<P> Clone for DraService<P> {
    fn clone(&self) -> Self {
        Self {
            preparer: Arc::clone(&self.preparer),
        }
    }
}

impl<P: ClaimPreparer> DraService<P> {
    pub(crate) fn new(preparer: Arc<P>) -> Self {
        Self { preparer }
    }

    /// Prepares every claim, keyed by UID.
    pub(crate) async fn prepare(
        &self,
        api: DraApi,
        claims: Vec<ClaimRef>,
    ) -> HashMap<String, Result<Vec<PreparedDevice>, String>> {
        each_claim(
            claims,
            |claim| self.preparer.prepare(claim),
            |claim, outcome| match outcome {
                Ok(devices) => tracing::info!(
                    %api, namespace = %claim.namespace, name = %claim.name, uid = %claim.uid,
                    cdi_devices = ?devices.iter().flat_map(|d| &d.cdi_device_ids).collect::<Vec<_>>(),
                    "NodePrepareResources: claim prepared"
                ),
                Err(error) => tracing::warn!(
                    %api, namespace = %claim.namespace, name = %claim.name, uid = %claim.uid, %error,
                    "NodePrepareResources: claim failed"
                ),
            },
        )
        .await
    }

    /// Unprepares every claim, keyed by UID.
    pub(crate) async fn unprepare(&self, api: DraApi, claims: Vec<ClaimRef>) -> HashMap<String, Result<(), String>> {
        each_claim(
            claims,
            |claim| self.preparer.unprepare(claim),
            |claim, outcome| match outcome {
                Ok(()) => tracing::info!(
                    %api, namespace = %claim.namespace, name = %claim.name, uid = %claim.uid,
                    "NodeUnprepareResources: claim unprepared"
                ),
                Err(error) => tracing::warn!(
                    %api, namespace = %claim.namespace, name = %claim.name, uid = %claim.uid, %error,
                    "NodeUnprepareResources: claim failed"
                ),
            },
        )
        .await
    }
}

/// Runs `call` for every claim concurrently (the preparer serialises what must be serial) and
/// logs each outcome; a claim missing a field gets that error without reaching the preparer.
async fn each_claim<T, F>(
    claims: Vec<ClaimRef>,
    call: impl Fn(ClaimRef) -> F,
    log: impl Fn(&ClaimRef, &Result<T, String>),
) -> HashMap<String, Result<T, String>>
where
    F: Future<Output = Result<T, String>>,
{
    let (call, log) = (&call, &log);
    let outcomes = join_all(claims.into_iter().map(|claim| async move {
        let outcome = match missing_field(&claim) {
            Some(error) => Err(error),
            None => call(claim.clone()).await,
        };
        log(&claim, &outcome);
        (claim.uid, outcome)
    }))
    .await;
    outcomes.into_iter().collect()
}

/// The kubelet always sends all three fields; a call without one is answered per claim rather
/// than handed to the preparer with a reference it cannot resolve.
fn missing_field(claim: &ClaimRef) -> Option<String> {
    let missing: Vec<&str> = [
        ("namespace", &claim.namespace),
        ("name", &claim.name),
        ("uid", &claim.uid),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_empty())
    .map(|(field, _)| field)
    .collect();
    (!missing.is_empty()).then(|| format!("claim {claim}: the request has no {}", missing.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_without_uid_is_named_in_the_error() {
        let claim = ClaimRef {
            namespace: "default".into(),
            name: "train".into(),
            uid: String::new(),
        };
        assert_eq!(
            missing_field(&claim).as_deref(),
            Some("claim default/train (): the request has no uid")
        );
    }
}
