//! Whether the node is bare metal, from DMI: VFIO hand-over is allowed only
//! there, so every doubt answers "not bare metal" (fail-closed).

use std::fs;

use crate::host_root::HostRoot;

pub const DMI_PRODUCT_NAME: &str = "sys/class/dmi/id/product_name";
pub const DMI_SYS_VENDOR: &str = "sys/class/dmi/id/sys_vendor";

/// Substrings of DMI product_name or sys_vendor that hypervisors and clouds
/// set, matched case-insensitively. Known limit: bare-metal cloud instances
/// (e.g. EC2 `*.metal`, sys_vendor "Amazon EC2") are reported as VMs, which
/// only withholds VFIO from them.
pub const HYPERVISOR_MARKERS: [&str; 10] = [
    "KVM",
    "VMware",
    "VirtualBox",
    "QEMU",
    "Bochs",
    "Xen",
    "Amazon EC2",
    "Google",
    "Microsoft Corporation",
    "OpenStack",
];

/// The verdict and the reason a human reads in status or logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BareMetalVerdict {
    pub bare_metal: bool,
    pub reason: String,
}

/// Reads DMI under `root` and judges.
pub fn detect_bare_metal(root: &HostRoot) -> BareMetalVerdict {
    let read = |rel: &str| {
        let path = root.path(rel);
        fs::read_to_string(&path)
            .map(|text| text.trim().to_string())
            .map_err(|error| format!("{}: {error}", path.display()))
    };
    match (read(DMI_PRODUCT_NAME), read(DMI_SYS_VENDOR)) {
        (Ok(product_name), Ok(sys_vendor)) => judge_dmi(&product_name, &sys_vendor),
        (Err(error), _) | (_, Err(error)) => BareMetalVerdict {
            bare_metal: false,
            reason: format!("DMI unreadable ({error}); assuming a virtual machine"),
        },
    }
}

/// The heuristic on values already read.
pub fn judge_dmi(product_name: &str, sys_vendor: &str) -> BareMetalVerdict {
    for (field, value) in [("product_name", product_name), ("sys_vendor", sys_vendor)] {
        let lower = value.to_lowercase();
        if let Some(marker) = HYPERVISOR_MARKERS.iter().find(|m| lower.contains(&m.to_lowercase())) {
            return BareMetalVerdict {
                bare_metal: false,
                reason: format!("DMI {field} {value:?} names a hypervisor or cloud ({marker})"),
            };
        }
    }
    BareMetalVerdict {
        bare_metal: true,
        reason: format!("DMI product_name {product_name:?}, sys_vendor {sys_vendor:?}: no hypervisor marker"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypervisors_and_clouds_seen_in_dmi_are_not_bare_metal() {
        // Values as these platforms report them.
        let guests = [
            ("Standard PC (Q35 + ICH9, 2009)", "QEMU"),
            ("KVM", "Red Hat"),
            ("VMware Virtual Platform", "VMware, Inc."),
            ("VirtualBox", "innotek GmbH"),
            ("Bochs", "Bochs"),
            ("HVM domU", "Xen"),
            ("c5.xlarge", "Amazon EC2"),
            ("Google Compute Engine", "Google"),
            ("Virtual Machine", "Microsoft Corporation"),
            ("OpenStack Nova", "OpenStack Foundation"),
        ];
        for (product, vendor) in guests {
            let verdict = judge_dmi(product, vendor);
            assert!(!verdict.bare_metal, "{product} / {vendor}: {}", verdict.reason);
        }
    }

    #[test]
    fn server_vendors_are_bare_metal_and_the_reason_quotes_dmi() {
        let verdict = judge_dmi("PowerEdge R750xa", "Dell Inc.");
        assert!(verdict.bare_metal);
        assert_eq!(
            verdict.reason,
            "DMI product_name \"PowerEdge R750xa\", sys_vendor \"Dell Inc.\": no hypervisor marker"
        );
        assert!(judge_dmi("DGXA100 920-23687-2530-000", "NVIDIA").bare_metal);
    }

    #[test]
    fn matching_ignores_case() {
        let verdict = judge_dmi("qemu standard pc", "unknown");
        assert!(!verdict.bare_metal);
        assert!(verdict.reason.contains("(QEMU)"), "{}", verdict.reason);
    }
}
