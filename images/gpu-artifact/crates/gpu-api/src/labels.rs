//! Label keys and object names shared by the components.

/// On a PhysicalGPU: the node it is on.
pub const NODE: &str = "gpu.deckhouse.io/node";
/// On a PhysicalGPU: `nvidia`, `amd` or `intel`.
pub const VENDOR: &str = "gpu.deckhouse.io/vendor";
/// On a PhysicalGPU: the normalised model, e.g. `a30-pcie`.
pub const DEVICE: &str = "gpu.deckhouse.io/device";

/// On a DeviceClass: who allocates Pods of the class, `BestFit` (gpu-dra-controller behind the
/// scheduling gate `gpu.deckhouse.io/allocation`) or `FirstFit` (the kube-scheduler alone).
/// gpu-controller renders it from `GPUClass.spec.allocationPolicy`; an admin may set it on a
/// hand-written DeviceClass. Absent means BestFit.
pub const ALLOCATION_POLICY_ANNOTATION: &str = "gpu.deckhouse.io/allocation-policy";

/// The scheduling gate the admission webhook puts on a Pod whose claims gpu-dra-controller allocates
/// (best fit); gpu-dra-controller removes it once it has, gpu-controller when the Pod waited too long,
/// the hook cleanup-on-disable when the module is disabled.
pub const SCHEDULING_GATE: &str = "gpu.deckhouse.io/allocation";
/// The label the webhook puts on a Pod it gates, so the Pods still gated are listed by it.
pub const ALLOCATION_GATE_LABEL: &str = "gpu.deckhouse.io/allocation-gate";

/// Node labels written by the node agent.
pub const NODE_OS_ID: &str = "gpu.deckhouse.io/os.id";
pub const NODE_OS_VERSION: &str = "gpu.deckhouse.io/os.version";
pub const NODE_KERNEL_VERSION: &str = "gpu.deckhouse.io/kernel.version";
pub const NODE_BAREMETAL: &str = "gpu.deckhouse.io/baremetal";
/// Every node label the node agent writes (the module removes them when it is disabled).
pub const NODE_AGENT_LABELS: [&str; 4] = [NODE_OS_ID, NODE_OS_VERSION, NODE_KERNEL_VERSION, NODE_BAREMETAL];

/// Node label `"true"` set by the module's NodeGroupConfiguration gpu-detect-node.sh once the node's
/// containerd has CDI on; gpu-handler (which hands GPUs to containers through CDI) runs only there.
pub const NODE_CDI: &str = "gpu.deckhouse.io/cdi";
/// Node label `"true"` set by the same NodeGroupConfiguration where the node has an NVIDIA GPU on PCI;
/// gpu-node-agent runs only there.
pub const NODE_NVIDIA_GPU: &str = "gpu.deckhouse.io/nvidia-gpu";
/// Every node label the module's NodeGroupConfigurations write (removed too when it is disabled).
pub const NODE_CONFIGURATION_LABELS: [&str; 2] = [NODE_CDI, NODE_NVIDIA_GPU];

/// Node label `"true"` kept by the hook bootstrap-nodes (with Deckhouse's rights; no node component may
/// write it) while a card of the node is DriverReady: gpu-handler, DCGM and dcgm-exporter run only
/// there. A label, not a node list in their Pod templates, so one node's change restarts nothing elsewhere.
pub const NODE_DRIVER_READY: &str = "gpu.deckhouse.io/driver-ready";
/// Every node label the module's hooks write (removed too when it is disabled).
pub const NODE_HOOK_LABELS: [&str; 1] = [NODE_DRIVER_READY];

/// `<node>-<index>-<vendorID>-<deviceID>`, where index is the card's position among the node's GPUs
/// sorted by PCI address: stable across restarts as long as the hardware does not change.
pub fn physical_gpu_name(node: &str, index: usize, vendor_id: &str, device_id: &str) -> String {
    format!(
        "{node}-{index}-{}-{}",
        vendor_id.to_ascii_lowercase(),
        device_id.to_ascii_lowercase()
    )
}

/// The value of a label: at most 63 characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
/// Kernel releases such as `5.15.0-91-generic` pass unchanged; anything else is cut down to fit.
pub fn label_value(raw: &str) -> String {
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_is_node_index_vendor_device_in_lowercase() {
        assert_eq!(physical_gpu_name("worker-1", 0, "10DE", "20B7"), "worker-1-0-10de-20b7");
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("5.15.0-91-generic"), "5.15.0-91-generic");
        assert_eq!(label_value("22.04"), "22.04");
        assert_eq!(label_value("6.1.0+debian"), "6.1.0_debian");
        assert_eq!(label_value("-x-"), "x");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }
}
