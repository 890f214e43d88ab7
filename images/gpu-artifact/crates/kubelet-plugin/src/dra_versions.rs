//! The generated DRA servers of v1 and v1beta1 mapped onto [`DraService`]: the same calls, the
//! message types differ only in `share_id`, which v1beta1 cannot carry.

use std::collections::HashMap;

use kubelet_plugin_api::{dra_v1 as v1, dra_v1beta1 as v1beta1};
use tonic::{Request, Response, Status};

use crate::dra_service::{DraApi, DraService};
use crate::preparer::{ClaimPreparer, ClaimRef, PreparedDevice};

/// The two generated servers have the same shape over distinct types: one implementation,
/// expanded for `$api` (the generated module), with `$device` turning a prepared device into
/// that version's `Device` message.
macro_rules! serve_dra_api {
    ($api:ident, $version:expr, $device:path) => {
        #[tonic::async_trait]
        impl<P: ClaimPreparer> $api::dra_plugin_server::DraPlugin for DraService<P> {
            async fn node_prepare_resources(
                &self,
                request: Request<$api::NodePrepareResourcesRequest>,
            ) -> Result<Response<$api::NodePrepareResourcesResponse>, Status> {
                let outcomes = self.prepare($version, claim_refs!(request)).await;
                let claims = by_uid(outcomes, |outcome| match outcome {
                    Ok(devices) => $api::NodePrepareResourceResponse {
                        devices: devices.into_iter().map($device).collect(),
                        error: String::new(),
                    },
                    Err(error) => $api::NodePrepareResourceResponse {
                        devices: Vec::new(),
                        error,
                    },
                });
                Ok(Response::new($api::NodePrepareResourcesResponse { claims }))
            }

            async fn node_unprepare_resources(
                &self,
                request: Request<$api::NodeUnprepareResourcesRequest>,
            ) -> Result<Response<$api::NodeUnprepareResourcesResponse>, Status> {
                let outcomes = self.unprepare($version, claim_refs!(request)).await;
                let claims = by_uid(outcomes, |outcome| $api::NodeUnprepareResourceResponse {
                    error: outcome.err().unwrap_or_default(),
                });
                Ok(Response::new($api::NodeUnprepareResourcesResponse { claims }))
            }
        }
    };
}

/// The claims of a request of either version: both `Claim` messages carry the same three fields.
macro_rules! claim_refs {
    ($request:expr) => {
        $request
            .into_inner()
            .claims
            .into_iter()
            .map(|claim| ClaimRef {
                namespace: claim.namespace,
                name: claim.name,
                uid: claim.uid,
            })
            .collect()
    };
}

serve_dra_api!(v1, DraApi::V1, device_v1);
serve_dra_api!(v1beta1, DraApi::V1beta1, device_v1beta1);

fn device_v1(device: PreparedDevice) -> v1::Device {
    v1::Device {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
        share_id: device.share_id,
    }
}

/// Each claim's outcome as the version's per-claim message, keyed by claim UID as both versions
/// answer.
fn by_uid<T, M>(outcomes: HashMap<String, T>, message: impl Fn(T) -> M) -> HashMap<String, M> {
    outcomes
        .into_iter()
        .map(|(uid, outcome)| (uid, message(outcome)))
        .collect()
}

/// v1beta1 has no `share_id` field, so it is left out.
fn device_v1beta1(device: PreparedDevice) -> v1beta1::Device {
    v1beta1::Device {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
    }
}
