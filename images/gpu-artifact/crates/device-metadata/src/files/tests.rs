use super::*;

fn writer(dir: &Path) -> DeviceMetadataWriter {
    DeviceMetadataWriter {
        driver: "gpu.deckhouse.io".into(),
        plugin_dir: dir.join("plugins/gpu.deckhouse.io"),
        cdi_dir: dir.join("cdi"),
    }
}

fn vm_card() -> MetadataDevice {
    MetadataDevice {
        request: "gpu-0".into(),
        pool: "gpus/w1".into(),
        device: "gpu0".into(),
        attributes: [(
            "resource.kubernetes.io/pciBusID".to_owned(),
            DeviceAttribute {
                string: Some("0000:01:00.0".into()),
                ..DeviceAttribute::default()
            },
        )]
        .into(),
    }
}

fn claim(pod_claim_name: Option<&str>) -> ClaimIdentity {
    ClaimIdentity {
        namespace: "vms".into(),
        name: "virt-launcher-vm-gpu-0-x7k".into(),
        uid: "0a1b".into(),
        pod_claim_name: pod_claim_name.map(str::to_owned),
    }
}

#[test]
fn a_template_claim_gets_its_file_where_kubevirt_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer(dir.path());
    let ids = writer.write(&claim(Some("gpu-0")), &[vm_card()]).unwrap();
    assert_eq!(ids["gpu-0"], "gpu.deckhouse.io/metadata=0a1b_gpu-0");

    let spec: Value = serde_json::from_slice(&std::fs::read(writer.cdi_spec_path("0a1b", "gpu-0")).unwrap()).unwrap();
    assert_eq!(spec["kind"], "gpu.deckhouse.io/metadata");
    assert_eq!(spec["cdiVersion"], "0.5.0");
    let mount = &spec["devices"][0]["containerEdits"]["mounts"][0];
    assert_eq!(
        mount["containerPath"],
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu-0/gpu-0/gpu.deckhouse.io-metadata.json"
    );
    assert_eq!(mount["options"], json!(["ro", "bind"]));

    let host_file = PathBuf::from(mount["hostPath"].as_str().unwrap());
    assert_eq!(
        host_file,
        dir.path()
            .join("plugins/gpu.deckhouse.io/dra-device-metadata/vms_virt-launcher-vm-gpu-0-x7k/gpu-0/metadata.json")
    );
    let text = std::fs::read_to_string(&host_file).unwrap();
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    let document = stream.next().unwrap().unwrap();
    assert!(stream.next().is_none(), "one API version, one object");
    assert_eq!(document["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
    assert_eq!(document["podClaimName"], "gpu-0");
    assert_eq!(
        document["requests"][0]["devices"][0]["attributes"]["resource.kubernetes.io/pciBusID"],
        json!({"string": "0000:01:00.0"})
    );
}

#[test]
fn a_claim_named_in_the_pod_is_found_by_its_own_name_and_removal_takes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer(dir.path());
    let mut sub = vm_card();
    sub.request = "gpu/whole".into();
    writer.write(&claim(None), &[sub]).unwrap();
    let spec: Value = serde_json::from_slice(&std::fs::read(writer.cdi_spec_path("0a1b", "gpu")).unwrap()).unwrap();
    assert_eq!(
        spec["devices"][0]["containerEdits"]["mounts"][0]["containerPath"],
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/virt-launcher-vm-gpu-0-x7k/gpu/gpu.deckhouse.io-metadata.json"
    );
    // An unrelated spec in the CDI directory stays.
    std::fs::write(dir.path().join("cdi/gpu.deckhouse.io-claim_0a1b.json"), "{}").unwrap();
    writer.remove("vms", "virt-launcher-vm-gpu-0-x7k", "0a1b").unwrap();
    assert!(!writer.cdi_spec_path("0a1b", "gpu").exists());
    assert!(
        !writer
            .metadata_path("vms", "virt-launcher-vm-gpu-0-x7k", "gpu")
            .exists()
    );
    assert!(dir.path().join("cdi/gpu.deckhouse.io-claim_0a1b.json").exists());
    writer.remove("vms", "virt-launcher-vm-gpu-0-x7k", "0a1b").unwrap();
}
