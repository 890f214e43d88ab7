//! The mutating admission webhook gpu-dra-controller serves (HTTPS, POST `/mutate-pods`): for a
//! Pod CREATE it reads the claims and templates the Pod names, asks [`decide`] and answers with
//! the JSONPatch that adds the gate. Classes come from a watch; a claim or template that cannot
//! be read in time counts as no class (the MutatingWebhookConfiguration fails open anyway). The
//! lookups of one Pod run at once, so a Pod with many claims is decided within one lookup's time.
//! The server and its limits are [`crate::webhook_server`]'s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use component_base::Shutdown;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::gate_classes::GateClasses;
use crate::pod_gate::{ClaimSource, GateDecision, claim_sources, decide, gate_patch, request_classes};
pub use crate::webhook_server::ConnectionLimits;

/// The path the MutatingWebhookConfiguration calls.
pub const MUTATE_PATH: &str = "/mutate-pods";
/// How long one claim or template may take to read: the API server waits at most 3 s in all.
const LOOKUP_TIMEOUT: Duration = Duration::from_millis(800);

#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub addr: SocketAddr,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub limits: ConnectionLimits,
}

#[derive(Clone)]
struct Admission {
    client: Client,
    classes: Store<DeviceClass>,
}

fn tls_acceptor(config: &WebhookConfig) -> anyhow::Result<TlsAcceptor> {
    let certs = CertificateDer::pem_file_iter(&config.cert_file)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificate {}", config.cert_file.display()))?;
    let key = PrivateKeyDer::from_pem_file(&config.key_file)
        .with_context(|| format!("reading key {}", config.key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(tls)))
}

/// Binds `config.addr` and serves admission until `shutdown` fires; returns the bound address.
pub async fn start(client: Client, config: WebhookConfig, shutdown: Shutdown) -> anyhow::Result<SocketAddr> {
    let acceptor = tls_acceptor(&config)?;
    let listener = TcpListener::bind(config.addr).await?;
    let local = listener.local_addr()?;
    let (classes, writer) = reflector::store();
    let watch = watcher(Api::<DeviceClass>::all(client.clone()), watcher::Config::default())
        .backoff(controller_plumbing::WatchBackoff::default())
        .reflect(writer)
        .for_each(|event| {
            if let Err(error) = event {
                tracing::warn!(%error, "DeviceClass watch error (admission)");
            }
            futures::future::ready(())
        });
    tokio::spawn(watch);
    let app = Router::new()
        .route(MUTATE_PATH, post(review))
        .with_state(Admission { client, classes });
    tokio::spawn(crate::webhook_server::serve(
        listener,
        acceptor,
        app,
        config.limits,
        shutdown,
    ));
    tracing::info!(%local, "admission webhook listening");
    Ok(local)
}

async fn review(
    State(admission): State<Admission>,
    Json(review): Json<AdmissionReview<Pod>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<Pod> = match review.try_into() {
        Ok(request) => request,
        Err(error) => return Json(AdmissionResponse::invalid(error.to_string()).into_review()),
    };
    Json(respond(&admission, &request).await.into_review())
}

async fn respond(admission: &Admission, request: &AdmissionRequest<Pod>) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let Some(pod) = request.object.as_ref() else {
        return response;
    };
    let namespace = request.namespace.clone().unwrap_or_default();
    let classes = GateClasses::new(admission.classes.state().iter().map(|c| c.as_ref()));
    let lookups = claim_sources(pod).into_iter().map(|source| async {
        let found = lookup(&admission.client, &namespace, &source).await;
        (source, found)
    });
    let sources = futures::future::join_all(lookups).await;
    let name = pod
        .metadata
        .name
        .clone()
        .or(pod.metadata.generate_name.clone())
        .unwrap_or_default();
    match decide(pod, &namespace, &classes, &sources) {
        GateDecision::Leave(reason) => {
            tracing::debug!(pod = %name, %namespace, %reason, "admitted without the allocation gate");
            response
        }
        GateDecision::Gate(reason) => {
            tracing::info!(pod = %name, %namespace, %reason, "adding the allocation gate");
            let patch = serde_json::from_value(gate_patch(pod)).expect("the gate patch is a JSONPatch");
            response.with_patch(patch).unwrap_or_else(|error| {
                tracing::error!(%error, "could not serialise the gate patch");
                AdmissionResponse::from(request)
            })
        }
    }
}

/// The classes a claim or template requests, `None` when it cannot be read in time.
async fn lookup(client: &Client, namespace: &str, source: &ClaimSource) -> Option<Vec<String>> {
    let read = async {
        match source {
            ClaimSource::Claim(name) => {
                let claim = Api::<ResourceClaim>::namespaced(client.clone(), namespace)
                    .get(name)
                    .await?;
                Ok::<_, kube::Error>(request_classes(claim.spec.devices.as_ref()))
            }
            ClaimSource::Template(name) => {
                let api = Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace);
                let template = api.get(name).await?;
                Ok(request_classes(template.spec.spec.devices.as_ref()))
            }
        }
    };
    match tokio::time::timeout(LOOKUP_TIMEOUT, read).await {
        Ok(Ok(classes)) => Some(classes),
        Ok(Err(error)) => {
            tracing::warn!(?source, %namespace, %error, "admission could not read the Pod's claim");
            None
        }
        Err(_) => {
            tracing::warn!(?source, %namespace, "admission timed out reading the Pod's claim");
            None
        }
    }
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
