//! NodePrepareResources / NodeUnprepareResources through both API versions over the real socket:
//! one answer per claim, a failing claim's error in its own entry.

mod support;

use std::collections::BTreeMap;

use kubelet_plugin_api::{connect_unix_socket, dra_v1 as v1, dra_v1beta1 as v1beta1};
use support::{claim, start_plugin};

fn v1_claim(name: &str, uid: &str) -> v1::Claim {
    v1::Claim {
        namespace: "team-a".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

fn v1beta1_claim(name: &str, uid: &str) -> v1beta1::Claim {
    v1beta1::Claim {
        namespace: "team-a".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

#[tokio::test]
async fn v1_prepare_answers_every_claim_with_its_devices_or_its_error() {
    let plugin = start_plugin().await;
    let channel = connect_unix_socket(plugin.server.dra_socket()).await.unwrap();
    let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);

    let request = v1::NodePrepareResourcesRequest {
        claims: vec![v1_claim("train", "uid-1"), v1_claim("fail-infer", "uid-2")],
    };
    let answers: BTreeMap<_, _> = client
        .node_prepare_resources(request)
        .await
        .expect("a claim's failure is not a gRPC error")
        .into_inner()
        .claims
        .into_iter()
        .collect();

    let expected = BTreeMap::from([
        (
            "uid-1".to_owned(),
            v1::NodePrepareResourceResponse {
                devices: vec![v1::Device {
                    request_names: vec!["gpu".into()],
                    pool_name: "gpus/node-a".into(),
                    device_name: "gpu-train".into(),
                    cdi_device_ids: vec!["gpu.deckhouse.io/claim=uid-1".into()],
                    share_id: Some("share-uid-1".into()),
                }],
                error: String::new(),
            },
        ),
        (
            "uid-2".to_owned(),
            v1::NodePrepareResourceResponse {
                devices: vec![],
                error: "claim team-a/fail-infer: device gpu0 is busy".into(),
            },
        ),
    ]);
    assert_eq!(answers, expected);
    let mut prepared = plugin.preparer.prepared.lock().unwrap().clone();
    prepared.sort();
    assert_eq!(prepared, vec![claim("fail-infer", "uid-2"), claim("train", "uid-1")]);
}

#[tokio::test]
async fn v1_unprepare_answers_every_claim() {
    let plugin = start_plugin().await;
    let channel = connect_unix_socket(plugin.server.dra_socket()).await.unwrap();
    let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);

    let request = v1::NodeUnprepareResourcesRequest {
        claims: vec![v1_claim("train", "uid-1"), v1_claim("fail-infer", "uid-2")],
    };
    let answers: BTreeMap<_, _> = client
        .node_unprepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims
        .into_iter()
        .map(|(uid, answer)| (uid, answer.error))
        .collect();

    assert_eq!(
        answers,
        BTreeMap::from([
            ("uid-1".to_owned(), String::new()),
            (
                "uid-2".to_owned(),
                "claim team-a/fail-infer: MIG instance is in use".to_owned()
            ),
        ])
    );
    let mut unprepared = plugin.preparer.unprepared.lock().unwrap().clone();
    unprepared.sort();
    assert_eq!(unprepared, vec![claim("fail-infer", "uid-2"), claim("train", "uid-1")]);
}

#[tokio::test]
async fn v1beta1_maps_to_the_same_calls_without_share_id() {
    let plugin = start_plugin().await;
    let channel = connect_unix_socket(plugin.server.dra_socket()).await.unwrap();
    let mut client = v1beta1::dra_plugin_client::DraPluginClient::new(channel);

    let prepare = v1beta1::NodePrepareResourcesRequest {
        claims: vec![v1beta1_claim("train", "uid-1"), v1beta1_claim("fail-infer", "uid-2")],
    };
    let answers = client
        .node_prepare_resources(prepare)
        .await
        .unwrap()
        .into_inner()
        .claims;
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(
        answers["uid-1"],
        v1beta1::NodePrepareResourceResponse {
            devices: vec![v1beta1::Device {
                request_names: vec!["gpu".into()],
                pool_name: "gpus/node-a".into(),
                device_name: "gpu-train".into(),
                cdi_device_ids: vec!["gpu.deckhouse.io/claim=uid-1".into()],
            }],
            error: String::new(),
        }
    );
    assert_eq!(answers["uid-2"].error, "claim team-a/fail-infer: device gpu0 is busy");

    let unprepare = v1beta1::NodeUnprepareResourcesRequest {
        claims: vec![v1beta1_claim("train", "uid-1")],
    };
    let answers = client
        .node_unprepare_resources(unprepare)
        .await
        .unwrap()
        .into_inner()
        .claims;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers["uid-1"].error, "");
    assert_eq!(
        *plugin.preparer.unprepared.lock().unwrap(),
        vec![claim("train", "uid-1")]
    );
}

#[tokio::test]
async fn a_claim_without_uid_is_answered_without_reaching_the_preparer() {
    let plugin = start_plugin().await;
    let channel = connect_unix_socket(plugin.server.dra_socket()).await.unwrap();
    let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);
    let request = v1::NodePrepareResourcesRequest {
        claims: vec![v1_claim("train", "")],
    };
    let answers = client
        .node_prepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims;
    assert_eq!(answers[""].error, "claim team-a/train (): the request has no uid");
    assert!(plugin.preparer.prepared.lock().unwrap().is_empty());
}
