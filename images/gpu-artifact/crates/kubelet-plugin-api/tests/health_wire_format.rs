//! The health protos must match the kubelet's field numbers and service names
//! (`staging/src/k8s.io/kubelet/pkg/apis/dra-health/{v1alpha1,v1beta1,v1}/api.proto`): these bytes
//! are what the kubelet's Go types encode for the same values.

use kubelet_plugin_api::{dra_health_v1 as v1, dra_health_v1alpha1 as v1alpha1, dra_health_v1beta1 as v1beta1};
use prost::Message;

fn v1_report() -> v1::NodeWatchResourcesResponse {
    v1::NodeWatchResourcesResponse {
        devices: vec![v1::DeviceHealth {
            device: Some(v1::DeviceIdentifier {
                pool_name: "p".into(),
                device_name: "d".into(),
            }),
            health: v1::HealthStatus::Unhealthy as i32,
            last_updated_time: 1,
            health_check_timeout_seconds: 30,
            message: "m".into(),
        }],
    }
}

#[test]
fn device_health_fields_are_on_the_kubelets_numbers() {
    // devices=1 { device=1 {pool_name=1, device_name=2}, health=2 (UNHEALTHY=2),
    // last_updated_time=3, health_check_timeout_seconds=4, message=5 }
    let device = [
        0x0a, 6, 0x0a, 1, b'p', 0x12, 1, b'd', 0x10, 2, 0x18, 1, 0x20, 30, 0x2a, 1, b'm',
    ];
    let mut want = vec![0x0a, device.len() as u8];
    want.extend(device);
    assert_eq!(v1_report().encode_to_vec(), want);
}

#[test]
fn the_three_versions_share_one_wire_format() {
    let bytes = v1_report().encode_to_vec();
    let alpha = v1alpha1::NodeWatchResourcesResponse::decode(bytes.as_slice()).unwrap();
    let beta = v1beta1::NodeWatchResourcesResponse::decode(bytes.as_slice()).unwrap();
    assert_eq!(alpha.encode_to_vec(), bytes);
    assert_eq!(beta.encode_to_vec(), bytes);
    assert_eq!(alpha.devices[0].health, v1alpha1::HealthStatus::Unhealthy as i32);
}

#[test]
fn service_names_are_what_the_kubelet_advertises() {
    assert_eq!(
        v1alpha1::dra_resource_health_server::SERVICE_NAME,
        "v1alpha1.DRAResourceHealth"
    );
    assert_eq!(
        v1beta1::dra_resource_health_server::SERVICE_NAME,
        "v1beta1.DRAResourceHealth"
    );
    assert_eq!(v1::dra_resource_health_server::SERVICE_NAME, "v1.DRAResourceHealth");
}
