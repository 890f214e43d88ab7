use kube::runtime::watcher;
use serde_json::json;

use super::*;

fn scrape(registry: &Registry) -> String {
    component_base::metrics_text(registry).unwrap()
}

fn gpu(name: &str, healthy: &str) -> PhysicalGPU {
    serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
        "metadata": {"name": name, "labels": {"gpu.deckhouse.io/node": "w1", "gpu.deckhouse.io/vendor": "nvidia", "gpu.deckhouse.io/device": "a30-pcie"}},
        "spec": {},
        "status": {
            "pciInfo": {"address": "0000:01:00.0", "class": {"code": "0302"}, "vendor": {"id": "10de"}, "device": {"id": "20b7", "name": "GA100GL [A30 PCIe]"}},
            "currentState": {"nvidia": {"gpuUUID": "GPU-aaaa"}},
            "conditions": [
                {"type": "DriverReady", "status": "True", "reason": "ValidatorReady", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "HardwareHealthy", "status": healthy, "reason": "XidCritical", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        }
    }))
    .unwrap()
}

#[test]
fn every_physical_gpu_is_shown_with_its_node_model_and_conditions_until_it_goes() {
    let mut registry = Registry::default();
    let mut writer = register(&mut registry);
    let empty = scrape(&registry);
    assert!(
        empty.contains("# TYPE gpu_physicalgpu_info gauge") && empty.contains("# TYPE gpu_physicalgpu_condition gauge"),
        "the families are served before any card exists: {empty}"
    );

    let card = gpu("w1-0-10de-20b7", "False");
    writer.apply_watcher_event(&watcher::Event::Apply(card.clone()));
    let text = scrape(&registry);
    for line in [
        r#"gpu_physicalgpu_info{physicalgpu="w1-0-10de-20b7",node="w1",vendor="nvidia",model="a30-pcie",pci_address="0000:01:00.0",UUID="GPU-aaaa"} 1"#,
        r#"gpu_physicalgpu_condition{physicalgpu="w1-0-10de-20b7",node="w1",model="a30-pcie",condition="DriverReady",status="True",reason="ValidatorReady"} 1"#,
        r#"gpu_physicalgpu_condition{physicalgpu="w1-0-10de-20b7",node="w1",model="a30-pcie",condition="HardwareHealthy",status="False",reason="XidCritical"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }

    writer.apply_watcher_event(&watcher::Event::Delete(card));
    let text = scrape(&registry);
    assert!(
        !text.contains("w1-0-10de-20b7"),
        "a removed card leaves no series: {text}"
    );
}

#[test]
fn a_card_the_handler_has_not_read_falls_back_to_its_pci_name_and_status_node() {
    let mut card = gpu("w2-0-10de-20b7", "Unknown");
    card.metadata.labels = None;
    let status = card.status.as_mut().unwrap();
    status.current_state = None;
    status.node_info = Some(serde_json::from_value(json!({"nodeName": "w2"})).unwrap());
    let (info, conditions) = series(&Arc::new(card.clone()));
    assert_eq!(
        (
            info.node.as_str(),
            info.vendor.as_str(),
            info.model.as_str(),
            info.UUID.as_str()
        ),
        ("w2", "unknown", "GA100GL [A30 PCIe]", "")
    );
    card.status.as_mut().unwrap().capabilities = Some(serde_json::from_value(json!({"vendor": "Nvidia"})).unwrap());
    assert_eq!(
        series(&Arc::new(card)).0.vendor,
        "nvidia",
        "the vendor the handler read stands in for the label"
    );
    assert_eq!(conditions[1].status, "Unknown");
}
