//! Timed DRA v1 calls on the handler's plugin socket, made the way the kubelet makes them: one
//! claim per NodePrepareResources / NodeUnprepareResources, on one long-lived connection. A claim
//! the plugin answers with an error stops the bench with that error and the handler's log.

use std::path::Path;
use std::time::{Duration, Instant};

use kubelet_plugin_api::connect_unix_socket;
use kubelet_plugin_api::dra_v1::dra_plugin_client::DraPluginClient;
use kubelet_plugin_api::dra_v1::{NodePrepareResourcesRequest, NodeUnprepareResourcesRequest};
use testbed::ComponentProcess;
use tonic::transport::Channel;

use crate::claims::AllocatedClaim;

pub struct DraCaller<'a> {
    client: DraPluginClient<Channel>,
    handler: &'a ComponentProcess,
}

impl<'a> DraCaller<'a> {
    /// Dials the DRA socket `socket` served by `handler`.
    pub async fn connect(socket: &Path, handler: &'a ComponentProcess) -> Self {
        let channel = connect_unix_socket(socket)
            .await
            .unwrap_or_else(|e| panic!("dialling {}: {e}", socket.display()));
        Self {
            client: DraPluginClient::new(channel),
            handler,
        }
    }

    /// NodePrepareResources for `claim`; returns the call's duration and the CDI ids answered.
    pub async fn prepare(&mut self, claim: &AllocatedClaim) -> (Duration, Vec<String>) {
        let request = NodePrepareResourcesRequest {
            claims: vec![claim.wire()],
        };
        let start = Instant::now();
        let answer = self.client.node_prepare_resources(request).await;
        let took = start.elapsed();
        let mut answers = answer
            .unwrap_or_else(|e| self.fail("NodePrepareResources", claim, &e))
            .into_inner();
        let answer = answers.claims.remove(&claim.uid).unwrap_or_default();
        if !answer.error.is_empty() || answer.devices.is_empty() {
            self.fail("NodePrepareResources", claim, &answer.error);
        }
        (
            took,
            answer.devices.into_iter().flat_map(|d| d.cdi_device_ids).collect(),
        )
    }

    /// NodeUnprepareResources for `claim`; returns the call's duration.
    pub async fn unprepare(&mut self, claim: &AllocatedClaim) -> Duration {
        let request = NodeUnprepareResourcesRequest {
            claims: vec![claim.wire()],
        };
        let start = Instant::now();
        let answer = self.client.node_unprepare_resources(request).await;
        let took = start.elapsed();
        let mut answers = answer
            .unwrap_or_else(|e| self.fail("NodeUnprepareResources", claim, &e))
            .into_inner();
        match answers.claims.remove(&claim.uid) {
            Some(answer) if answer.error.is_empty() => took,
            other => self.fail("NodeUnprepareResources", claim, &format!("{other:?}")),
        }
    }

    /// The transport alone: NodePrepareResources with no claim (the service answers an empty map
    /// without reading the API or the disk).
    pub async fn empty_round_trip(&mut self) -> Duration {
        let start = Instant::now();
        let answer = self
            .client
            .node_prepare_resources(NodePrepareResourcesRequest { claims: vec![] })
            .await;
        let took = start.elapsed();
        let answer = answer.unwrap_or_else(|e| panic!("empty NodePrepareResources: {e}"));
        assert!(answer.into_inner().claims.is_empty(), "an empty call answers no claim");
        took
    }

    fn fail(&self, call: &str, claim: &AllocatedClaim, error: &dyn std::fmt::Display) -> ! {
        panic!(
            "{call} of claim {}/{} (device {}) failed: {error}\n--- handler log (tail) ---\n{}",
            claim.namespace,
            claim.name,
            claim.device,
            tail(&self.handler.log(), 40)
        )
    }
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
