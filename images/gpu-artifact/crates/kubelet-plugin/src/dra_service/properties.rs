//! Bad input by the thousand for kubelet requests: any bytes on the wire, and requests that decode
//! but carry empty, huge, duplicate or path-like fields (`/`, `..`) and claims nobody prepared.
//! Decoding refuses or yields claims; every distinct UID gets exactly one answer; a claim with a
//! bad field is refused naming the field and never reaches the preparer; what the preparer holds
//! (claims prepared before) is never lost.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kubelet_plugin_api::dra_v1 as v1;
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};
use prost::Message;

use super::{DraApi, DraService};
use crate::preparer::{ClaimPreparer, ClaimRef, PreparedDevice};

/// Holds a claim prepared before the run (`kept`), prepares any other, and records what reached it.
struct Node {
    prepared: Mutex<BTreeSet<String>>,
    reached: Mutex<Vec<ClaimRef>>,
}

const KEPT: &str = "0f3a1c2e-6b7d-4e5f-8a9b-0c1d2e3f4a5b";

impl ClaimPreparer for Node {
    async fn prepare(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        self.reached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(claim.clone());
        self.prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(claim.uid);
        Ok(Vec::new())
    }

    async fn unprepare(&self, claim: ClaimRef) -> Result<(), String> {
        self.reached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(claim.clone());
        if claim.uid != KEPT {
            self.prepared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&claim.uid);
        }
        Ok(())
    }
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("..".to_owned()),
        Just("a/b".to_owned()),
        Just("../../etc/passwd".to_owned()),
        Just("train".to_owned()),
        Just(KEPT.to_owned()),
        "[a-z0-9-]{1,12}",
        "[a-z0-9]{300}",
        any::<String>(),
    ]
}

fn request() -> impl Strategy<Value = Vec<u8>> {
    let claim = (field(), field(), field()).prop_map(|(namespace, name, uid)| v1::Claim { namespace, name, uid });
    let structured = proptest::collection::vec(claim, 0..40)
        .prop_map(|claims| v1::NodePrepareResourcesRequest { claims }.encode_to_vec());
    prop_oneof![
        4 => structured,
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn property_any_kubelet_request_is_answered_per_claim_and_loses_nothing() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|error| panic!("a runtime: {error}"));
    check(
        "kubelet requests",
        file!(),
        (request(), any::<bool>()),
        |(bytes, prepare)| {
            let Ok(decoded) = v1::NodePrepareResourcesRequest::decode(bytes.as_slice()) else {
                // Refused by the gRPC layer before any claim is looked at.
                return Ok(());
            };
            let node = std::sync::Arc::new(Node {
                prepared: Mutex::new(BTreeSet::from([KEPT.to_owned()])),
                reached: Mutex::new(Vec::new()),
            });
            let service = DraService::new(std::sync::Arc::clone(&node));
            let claims: Vec<ClaimRef> = decoded
                .claims
                .iter()
                .map(|c| ClaimRef {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    uid: c.uid.clone(),
                })
                .collect();
            let answers: Vec<(String, Option<String>)> = runtime.block_on(async {
                if prepare {
                    let outcomes = service.prepare(DraApi::V1, claims.clone()).await;
                    outcomes.into_iter().map(|(uid, o)| (uid, o.err())).collect()
                } else {
                    let outcomes = service.unprepare(DraApi::V1, claims.clone()).await;
                    outcomes.into_iter().map(|(uid, o)| (uid, o.err())).collect()
                }
            });
            let distinct: BTreeSet<&str> = claims.iter().map(|c| c.uid.as_str()).collect();
            ensure(answers.len() == distinct.len(), || {
                format!("{} answers for {} UIDs", answers.len(), distinct.len())
            })?;
            for (uid, error) in &answers {
                if let Some(error) = error {
                    ensure(error.contains("the request"), || format!("{uid:?}: {error}"))?;
                }
            }
            for reached in node.reached.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                ensure(super::bad_field(reached).is_none(), || {
                    format!("{reached:?} reached the preparer")
                })?;
                ensure(!reached.uid.contains('/') && !reached.uid.contains(".."), || {
                    format!("{reached:?}")
                })?;
            }
            let prepared = node.prepared.lock().unwrap_or_else(|p| p.into_inner());
            ensure(prepared.contains(KEPT), || "the claim prepared before was lost".into())
        },
    );
}
