//! The generated DRA servers of v1 and v1beta1 mapped onto [`DraService`]: the same calls, the
//! message types differ only in `share_id`, which v1beta1 cannot carry.

use kubelet_plugin_api::{dra_v1 as v1, dra_v1beta1 as v1beta1};
use tonic::{Request, Response, Status};

use crate::dra_service::{DraApi, DraService};
use crate::preparer::{ClaimPreparer, ClaimRef};

#[tonic::async_trait]
impl<P: ClaimPreparer> v1::dra_plugin_server::DraPlugin for DraService<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims.into_iter().map(claim_ref_v1).collect();
        let outcomes = self.prepare(DraApi::V1, claims).await;
        let claims = outcomes
            .into_iter()
            .map(|(uid, outcome)| {
                let response = match outcome {
                    Ok(devices) => v1::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|device| v1::Device {
                                request_names: device.request_names,
                                pool_name: device.pool_name,
                                device_name: device.device_name,
                                cdi_device_ids: device.cdi_device_ids,
                                share_id: device.share_id,
                            })
                            .collect(),
                        error: String::new(),
                    },
                    Err(error) => v1::NodePrepareResourceResponse {
                        devices: Vec::new(),
                        error,
                    },
                };
                (uid, response)
            })
            .collect();
        Ok(Response::new(v1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims.into_iter().map(claim_ref_v1).collect();
        let outcomes = self.unprepare(DraApi::V1, claims).await;
        let claims = outcomes
            .into_iter()
            .map(|(uid, outcome)| {
                let error = outcome.err().unwrap_or_default();
                (uid, v1::NodeUnprepareResourceResponse { error })
            })
            .collect();
        Ok(Response::new(v1::NodeUnprepareResourcesResponse { claims }))
    }
}

#[tonic::async_trait]
impl<P: ClaimPreparer> v1beta1::dra_plugin_server::DraPlugin for DraService<P> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims.into_iter().map(claim_ref_v1beta1).collect();
        let outcomes = self.prepare(DraApi::V1beta1, claims).await;
        let claims = outcomes
            .into_iter()
            .map(|(uid, outcome)| {
                let response = match outcome {
                    Ok(devices) => v1beta1::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|device| v1beta1::Device {
                                request_names: device.request_names,
                                pool_name: device.pool_name,
                                device_name: device.device_name,
                                cdi_device_ids: device.cdi_device_ids,
                            })
                            .collect(),
                        error: String::new(),
                    },
                    Err(error) => v1beta1::NodePrepareResourceResponse {
                        devices: Vec::new(),
                        error,
                    },
                };
                (uid, response)
            })
            .collect();
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let claims = request.into_inner().claims.into_iter().map(claim_ref_v1beta1).collect();
        let outcomes = self.unprepare(DraApi::V1beta1, claims).await;
        let claims = outcomes
            .into_iter()
            .map(|(uid, outcome)| {
                let error = outcome.err().unwrap_or_default();
                (uid, v1beta1::NodeUnprepareResourceResponse { error })
            })
            .collect();
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse { claims }))
    }
}

fn claim_ref_v1(claim: v1::Claim) -> ClaimRef {
    ClaimRef {
        namespace: claim.namespace,
        name: claim.name,
        uid: claim.uid,
    }
}

fn claim_ref_v1beta1(claim: v1beta1::Claim) -> ClaimRef {
    ClaimRef {
        namespace: claim.namespace,
        name: claim.name,
        uid: claim.uid,
    }
}
