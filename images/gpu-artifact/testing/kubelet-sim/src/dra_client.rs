//! Calls to a plugin's DRA service in the version chosen at registration, and the kubelet's
//! checks of the answer: every claim answered, no unknown claim, no per-claim error.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tonic::transport::Channel;

use crate::DraVersion;

/// A claim as the kubelet sends it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimId {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for ClaimId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One device of a prepared claim, as NodePrepareResources returned it (the kubelet keeps these in
/// its claim info cache: health reports and `allocatedResourcesStatus` are keyed by them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedDeviceInfo {
    pub request_names: Vec<String>,
    pub pool: String,
    pub device: String,
    pub cdi_ids: Vec<String>,
}

#[derive(Clone)]
pub(crate) struct DraClient {
    version: DraVersion,
    channel: Channel,
}

/// Per claim UID: its devices, or the plugin's error.
type Answers = HashMap<String, Result<Vec<PreparedDeviceInfo>, String>>;

/// The two calls the kubelet makes, named as in its messages.
#[derive(Debug, Clone, Copy)]
enum DraCall {
    Prepare,
    Unprepare,
}

impl DraCall {
    fn method(self) -> &'static str {
        match self {
            DraCall::Prepare => "NodePrepareResources",
            DraCall::Unprepare => "NodeUnprepareResources",
        }
    }
}

/// v1 and v1beta1 generate the same client and messages as distinct types: a call is written once
/// and expanded with `$api` naming the generated module of the version chosen at registration.
macro_rules! with_dra_api {
    ($version:expr, $api:ident => $call:expr) => {
        match $version {
            DraVersion::V1 => {
                use kubelet_plugin_api::dra_v1 as $api;
                $call
            }
            DraVersion::V1beta1 => {
                use kubelet_plugin_api::dra_v1beta1 as $api;
                $call
            }
        }
    };
}

impl DraClient {
    pub(crate) fn new(version: DraVersion, channel: Channel) -> Self {
        Self { version, channel }
    }

    /// The connection to the plugin's socket (its health service is served there too).
    pub(crate) fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// NodePrepareResources: the devices of each claim, or every problem the kubelet would report.
    pub(crate) async fn prepare(
        &self,
        claims: &[ClaimId],
        timeout: Duration,
    ) -> Result<BTreeMap<ClaimId, Vec<PreparedDeviceInfo>>, Vec<String>> {
        self.checked_call(DraCall::Prepare, claims, timeout).await
    }

    /// NodeUnprepareResources: Ok when every claim was unprepared.
    pub(crate) async fn unprepare(&self, claims: &[ClaimId], timeout: Duration) -> Result<(), Vec<String>> {
        self.checked_call(DraCall::Unprepare, claims, timeout).await.map(|_| ())
    }

    /// One call with the kubelet's timeout and its checks of the answers.
    async fn checked_call(
        &self,
        call: DraCall,
        claims: &[ClaimId],
        timeout: Duration,
    ) -> Result<BTreeMap<ClaimId, Vec<PreparedDeviceInfo>>, Vec<String>> {
        let answers = timed(call.method(), self.version, timeout, self.send(call, claims)).await?;
        check_answers(call.method(), claims, answers)
    }

    /// The gRPC call itself; an unprepared claim answers with no devices.
    async fn send(&self, call: DraCall, claims: &[ClaimId]) -> Result<Answers, tonic::Status> {
        with_dra_api!(self.version, api => {
            let mut client = api::dra_plugin_client::DraPluginClient::new(self.channel.clone());
            let claims: Vec<api::Claim> = claims
                .iter()
                .map(|c| api::Claim {
                    namespace: c.namespace.clone(),
                    uid: c.uid.clone(),
                    name: c.name.clone(),
                })
                .collect();
            Ok(match call {
                DraCall::Prepare => {
                    let request = api::NodePrepareResourcesRequest { claims };
                    let answers = client.node_prepare_resources(request).await?.into_inner().claims;
                    answers
                        .into_iter()
                        .map(|(uid, a)| {
                            let devices = a.devices.into_iter().map(|d| PreparedDeviceInfo {
                                request_names: d.request_names,
                                pool: d.pool_name,
                                device: d.device_name,
                                cdi_ids: d.cdi_device_ids,
                            });
                            (uid, per_claim(a.error, devices))
                        })
                        .collect()
                }
                DraCall::Unprepare => {
                    let request = api::NodeUnprepareResourcesRequest { claims };
                    let answers = client.node_unprepare_resources(request).await?.into_inner().claims;
                    answers.into_iter().map(|(uid, a)| (uid, per_claim(a.error, []))).collect()
                }
            })
        })
    }
}

fn per_claim(
    error: String,
    devices: impl IntoIterator<Item = PreparedDeviceInfo>,
) -> Result<Vec<PreparedDeviceInfo>, String> {
    if error.is_empty() {
        Ok(devices.into_iter().collect())
    } else {
        Err(error)
    }
}

/// An overall gRPC error or a timeout: the kubelet ignores the whole response.
async fn timed(
    method: &str,
    version: DraVersion,
    timeout: Duration,
    call: impl Future<Output = Result<Answers, tonic::Status>>,
) -> Result<Answers, Vec<String>> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(answers)) => Ok(answers),
        Ok(Err(status)) => Err(vec![format!(
            "{method} ({version}) failed: {}: {}",
            status.code(),
            status.message()
        )]),
        Err(_) => Err(vec![format!("{method} ({version}) timed out after {timeout:?}")]),
    }
}

/// The kubelet's rules: an error per failed claim, per claim left out, per unknown UID.
fn check_answers(
    method: &str,
    claims: &[ClaimId],
    mut answers: Answers,
) -> Result<BTreeMap<ClaimId, Vec<PreparedDeviceInfo>>, Vec<String>> {
    let mut errors = Vec::new();
    let mut prepared = BTreeMap::new();
    for claim in claims {
        match answers.remove(&claim.uid) {
            Some(Ok(devices)) => {
                prepared.insert(claim.clone(), devices);
            }
            Some(Err(error)) => errors.push(format!("{method} failed for ResourceClaim {claim}: {error}")),
            None => errors.push(format!("{method} left out ResourceClaim {claim} (uid {})", claim.uid)),
        }
    }
    errors.extend(
        answers
            .into_keys()
            .map(|uid| format!("{method} returned a result for unknown claim UID {uid}")),
    );
    if errors.is_empty() { Ok(prepared) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str) -> ClaimId {
        ClaimId {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn device(cdi: &str) -> PreparedDeviceInfo {
        PreparedDeviceInfo {
            request_names: vec![],
            pool: "p".into(),
            device: "gpu0".into(),
            cdi_ids: vec![cdi.into()],
        }
    }

    #[test]
    fn left_out_failed_and_unknown_claims_are_all_errors() {
        let answers = HashMap::from([
            ("uid-a".to_owned(), Ok(vec![device("cdi/a")])),
            ("uid-b".to_owned(), Err("busy".to_owned())),
            ("uid-x".to_owned(), Ok(vec![])),
        ]);
        let errors = check_answers("NodePrepareResources", &[claim("a"), claim("b"), claim("c")], answers).unwrap_err();
        assert_eq!(
            errors,
            vec![
                "NodePrepareResources failed for ResourceClaim ns/b: busy",
                "NodePrepareResources left out ResourceClaim ns/c (uid uid-c)",
                "NodePrepareResources returned a result for unknown claim UID uid-x",
            ]
        );
    }

    #[test]
    fn complete_answers_give_each_claims_devices() {
        let answers = HashMap::from([("uid-a".to_owned(), Ok(vec![device("cdi/a")]))]);
        let prepared = check_answers("NodePrepareResources", &[claim("a")], answers).unwrap();
        assert_eq!(prepared, BTreeMap::from([(claim("a"), vec![device("cdi/a")])]));
    }
}
