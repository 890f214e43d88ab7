//! KEP-5304 device metadata for a prepared claim (`device-metadata` writes it): each device's
//! standard PCI attributes (`resource.kubernetes.io/pciBusID`, `resource.kubernetes.io/pcieRoot`
//! from the card's sysfs path) and ours (`deviceType`, `physicalGPU`, `uuid`), mounted into the
//! claim's containers. Published where the cluster defines it, Kubernetes 1.36 (alpha) and later:
//! only there does a template-made claim carry `resource.kubernetes.io/pod-claim-name`, which
//! consumers such as KubeVirt's virt-launcher need to find the file.
//!
//! A failure to write it is logged and the claim stays prepared without it, as the Kubernetes
//! helper does: a workload that does not read the file must not pay for it.

use std::collections::BTreeMap;

use device_metadata::{ClaimIdentity, DeviceMetadataWriter, MetadataDevice, POD_CLAIM_NAME_ANNOTATION};
use dra_offers::OfferedDevice;
use host_inventory::{HostRoot, pcie_root};
use k8s_openapi::api::resource::v1::{DeviceAttribute, ResourceClaim};
use kube::ResourceExt;
use kubelet_plugin::{ClaimRef, PreparedDevice};
use node_prepare::{AllocatedDevice, NodePrepareConfig};

/// The first release whose claims and consumers know device metadata.
const FIRST_MINOR: u32 = 36;

/// The writer of our driver's metadata below the pipeline's plugin and CDI directories.
pub(crate) fn writer(driver: &str, config: &NodePrepareConfig) -> DeviceMetadataWriter {
    DeviceMetadataWriter {
        driver: driver.to_owned(),
        plugin_dir: config.plugin_dir.clone(),
        cdi_dir: config.cdi_dir.clone(),
    }
}

/// Whether an API server of minor version `minor` (`36`, `37+`) defines device metadata.
pub(crate) fn supported(minor: &str) -> bool {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u32>().is_ok_and(|minor| minor >= FIRST_MINOR)
}

/// Writes the metadata of `stored`'s prepared `devices` and adds each request's CDI id to the first
/// device of the request in `prepared`.
pub(crate) fn publish(
    writer: &DeviceMetadataWriter,
    config: &NodePrepareConfig,
    claim: &ClaimRef,
    stored: &ResourceClaim,
    devices: &[AllocatedDevice],
    prepared: &mut [PreparedDevice],
) {
    let identity = ClaimIdentity {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        uid: claim.uid.clone(),
        pod_claim_name: stored.annotations().get(POD_CLAIM_NAME_ANNOTATION).cloned(),
    };
    let root = HostRoot::new(&config.host_root);
    let metadata: Vec<MetadataDevice> = devices
        .iter()
        .map(|device| MetadataDevice {
            request: device.request.clone(),
            pool: device.pool.clone(),
            device: device.device.clone(),
            attributes: attributes(&root, &device.target),
        })
        .collect();
    let ids = match writer.write(&identity, &metadata) {
        Ok(ids) => ids,
        Err(error) => {
            tracing::warn!(claim = %claim, %error, "device metadata not written; the claim is prepared without it");
            return;
        }
    };
    for (request, id) in ids {
        let first = prepared.iter_mut().find(|device| {
            device
                .request_names
                .iter()
                .any(|name| name.split('/').next() == Some(request.as_str()))
        });
        if let Some(device) = first
            && !device.cdi_device_ids.contains(&id)
        {
            device.cdi_device_ids.push(id);
        }
    }
}

fn attributes(root: &HostRoot, target: &OfferedDevice) -> BTreeMap<String, DeviceAttribute> {
    let string = |value: &str| DeviceAttribute {
        string: Some(value.to_owned()),
        ..DeviceAttribute::default()
    };
    let address = target.pci_address().to_string();
    let mut attributes = BTreeMap::from([("resource.kubernetes.io/pciBusID".to_owned(), string(&address))]);
    if let Some(root_complex) = pcie_root(root, &address) {
        attributes.insert("resource.kubernetes.io/pcieRoot".to_owned(), string(&root_complex));
    }
    let (device_type, physical_gpu, uuid) = match target {
        OfferedDevice::Physical { physical_gpu, uuid, .. }
        | OfferedDevice::SharedPhysical { physical_gpu, uuid, .. } => ("Physical", physical_gpu, uuid),
        OfferedDevice::Mig {
            physical_gpu,
            parent_uuid,
            ..
        } => ("MIG", physical_gpu, parent_uuid),
    };
    attributes.insert("gpu.deckhouse.io/deviceType".to_owned(), string(device_type));
    attributes.insert("gpu.deckhouse.io/physicalGPU".to_owned(), string(physical_gpu));
    let uuid_key = if device_type == "MIG" { "parentUUID" } else { "uuid" };
    attributes.insert(format!("gpu.deckhouse.io/{uuid_key}"), string(uuid));
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_from_1_36_publish_metadata() {
        assert!(!supported("34"));
        assert!(!supported("35+"));
        assert!(supported("36"));
        assert!(supported("37+"));
        assert!(!supported(""));
    }
}
