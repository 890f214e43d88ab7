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
/// logs each outcome; a claim with a missing or malformed field gets that error without reaching
/// the preparer. A UID named twice is handled once: the answer is keyed by UID.
async fn each_claim<T, F>(
    claims: Vec<ClaimRef>,
    call: impl Fn(ClaimRef) -> F,
    log: impl Fn(&ClaimRef, &Result<T, String>),
) -> HashMap<String, Result<T, String>>
where
    F: Future<Output = Result<T, String>>,
{
    let (call, log) = (&call, &log);
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<ClaimRef> = claims
        .into_iter()
        .filter(|claim| seen.insert(claim.uid.clone()))
        .collect();
    let outcomes = join_all(distinct.into_iter().map(|claim| async move {
        let outcome = match bad_field(&claim) {
            Some(error) => Err(error),
            None => call(claim.clone()).await,
        };
        log(&claim, &outcome);
        (claim.uid, outcome)
    }))
    .await;
    outcomes.into_iter().collect()
}

/// The kubelet always sends the claim's namespace, name and UID as the API server has them; a call
/// whose fields are missing or could not name a Kubernetes object is answered per claim rather than
/// handed to the preparer, which builds file names from the UID (a `/` or `..` must never reach a
/// path).
fn bad_field(claim: &ClaimRef) -> Option<String> {
    let missing: Vec<&str> = [
        ("namespace", &claim.namespace),
        ("name", &claim.name),
        ("uid", &claim.uid),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_empty())
    .map(|(field, _)| field)
    .collect();
    if !missing.is_empty() {
        return Some(format!(
            "claim {}: the request has no {}",
            shown(claim),
            missing.join(", ")
        ));
    }
    let problem = if !is_uid(&claim.uid) {
        "uid is not a Kubernetes UID (letters, digits and '-', at most 128)"
    } else if !is_dns_label(&claim.namespace) {
        "namespace is not a DNS label"
    } else if !is_dns_subdomain(&claim.name) {
        "name is not a DNS subdomain"
    } else {
        return None;
    };
    Some(format!("claim {}: the request's {problem}", shown(claim)))
}

/// `namespace/name (uid)` with each part cut to 64 characters, so a huge field makes a short message.
fn shown(claim: &ClaimRef) -> String {
    // As written when it is a plain name (or empty), quoted otherwise, cut to 64 characters.
    let cut = |text: &str| -> String {
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        let mut chars = text.chars();
        let head: String = chars.by_ref().take(64).collect();
        match (plain, chars.next().is_some()) {
            (true, false) => head,
            (_, false) => format!("{head:?}"),
            (_, true) => format!("{head:?}…"),
        }
    };
    format!("{}/{} ({})", cut(&claim.namespace), cut(&claim.name), cut(&claim.uid))
}

fn is_uid(uid: &str) -> bool {
    (1..=128).contains(&uid.len()) && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn is_dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_dns_subdomain(text: &str) -> bool {
    (1..=253).contains(&text.len()) && text.split('.').all(is_dns_label)
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests {
    use super::*;

    fn claim(namespace: &str, name: &str, uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn a_claim_without_uid_is_named_in_the_error() {
        assert_eq!(
            bad_field(&claim("default", "train", "")).as_deref(),
            Some("claim default/train (): the request has no uid")
        );
    }

    #[test]
    fn a_uid_that_could_reach_a_path_never_reaches_the_preparer() {
        for uid in ["../../etc", "a/b", ".."] {
            let error = bad_field(&claim("default", "train", uid)).unwrap();
            assert!(
                error.ends_with("the request's uid is not a Kubernetes UID (letters, digits and '-', at most 128)"),
                "{error}"
            );
        }
        let fine = claim("default", "train.v1", "0f3a1c2e-6b7d-4e5f-8a9b-0c1d2e3f4a5b");
        assert_eq!(bad_field(&fine), None);
    }
}
