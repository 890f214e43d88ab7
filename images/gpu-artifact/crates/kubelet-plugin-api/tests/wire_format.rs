//! Our protos must put every field on the kubelet's field number: these bytes are what the
//! kubelet's Go types encode for the same values (tag = field number << 3 | wire type).

use kubelet_plugin_api::{dra_v1 as v1, dra_v1beta1 as v1beta1, registration};
use prost::Message;

#[test]
fn v1_device_fields_including_share_id() {
    let device = v1::Device {
        request_names: vec!["a".into()],
        pool_name: "p".into(),
        device_name: "d".into(),
        cdi_device_ids: vec!["c".into()],
        share_id: Some("s".into()),
    };
    assert_eq!(
        device.encode_to_vec(),
        [
            0x0a, 1, b'a', 0x12, 1, b'p', 0x1a, 1, b'd', 0x22, 1, b'c', 0x2a, 1, b's'
        ]
    );
}

#[test]
fn v1beta1_device_has_no_share_id() {
    let with_share = v1::Device {
        pool_name: "p".into(),
        share_id: Some("s".into()),
        ..v1::Device::default()
    };
    let decoded = v1beta1::Device::decode(with_share.encode_to_vec().as_slice()).unwrap();
    assert_eq!(decoded.pool_name, "p");
    assert_eq!(
        decoded.encode_to_vec(),
        [0x12, 1, b'p'],
        "v1beta1 drops field 5 it does not know"
    );
}

#[test]
fn claim_and_responses() {
    let claim = v1::Claim {
        namespace: "n".into(),
        uid: "u".into(),
        name: "m".into(),
    };
    assert_eq!(claim.encode_to_vec(), [0x0a, 1, b'n', 0x12, 1, b'u', 0x1a, 1, b'm']);

    let prepare = v1::NodePrepareResourcesResponse {
        claims: [(
            "k".to_owned(),
            v1::NodePrepareResourceResponse {
                devices: vec![],
                error: "e".into(),
            },
        )]
        .into(),
    };
    // claims=1 is a map entry message {key=1, value=2}; the value's error is field 2.
    assert_eq!(
        prepare.encode_to_vec(),
        [0x0a, 8, 0x0a, 1, b'k', 0x12, 3, 0x12, 1, b'e']
    );
    let unprepare = v1::NodeUnprepareResourceResponse { error: "e".into() };
    assert_eq!(unprepare.encode_to_vec(), [0x0a, 1, b'e']);
}

#[test]
fn registration_messages() {
    let info = registration::PluginInfo {
        r#type: "t".into(),
        name: "n".into(),
        endpoint: "e".into(),
        supported_versions: vec!["v".into()],
    };
    assert_eq!(
        info.encode_to_vec(),
        [0x0a, 1, b't', 0x12, 1, b'n', 0x1a, 1, b'e', 0x22, 1, b'v']
    );
    let status = registration::RegistrationStatus {
        plugin_registered: true,
        error: "x".into(),
    };
    assert_eq!(status.encode_to_vec(), [0x08, 1, 0x12, 1, b'x']);
}
