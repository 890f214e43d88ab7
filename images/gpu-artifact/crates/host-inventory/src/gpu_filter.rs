//! Which PCI functions count as GPUs: data, so another vendor is a new entry,
//! not new code.

/// NVIDIA Corporation's PCI vendor id (pci.ids `10de`).
pub const VENDOR_NVIDIA: u16 = 0x10de;
/// AMD's GPU vendor id (pci.ids `1002 Advanced Micro Devices, Inc. [AMD/ATI]`).
pub const VENDOR_AMD: u16 = 0x1002;
/// Intel Corporation's PCI vendor id (pci.ids `8086`).
pub const VENDOR_INTEL: u16 = 0x8086;

/// PCI class 03 subclass 00: VGA compatible controller (consumer and workstation cards).
pub const CLASS_VGA_CONTROLLER: u16 = 0x0300;
/// PCI class 03 subclass 02: 3D controller (data-centre cards without display outputs).
pub const CLASS_3D_CONTROLLER: u16 = 0x0302;

/// Vendors and class codes (class and subclass, without the prog-if byte) of
/// the functions to report as GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuFilter {
    pub vendors: Vec<u16>,
    pub classes: Vec<u16>,
}

impl GpuFilter {
    /// NVIDIA display and 3D controllers: what v0 of the module manages.
    pub fn nvidia() -> Self {
        Self {
            vendors: vec![VENDOR_NVIDIA],
            classes: vec![CLASS_VGA_CONTROLLER, CLASS_3D_CONTROLLER],
        }
    }

    /// Whether a function with this vendor id and 24-bit class (as in sysfs `class`) is a GPU.
    pub fn matches(&self, vendor: u16, class: u32) -> bool {
        let class_code = (class >> 8) as u16;
        self.vendors.contains(&vendor) && self.classes.contains(&class_code)
    }
}

impl Default for GpuFilter {
    fn default() -> Self {
        Self::nvidia()
    }
}

/// The short vendor name used in labels (`gpu.deckhouse.io/vendor`), for the vendors the module knows.
pub fn vendor_label(vendor: u16) -> Option<&'static str> {
    match vendor {
        VENDOR_NVIDIA => Some("nvidia"),
        VENDOR_AMD => Some("amd"),
        VENDOR_INTEL => Some("intel"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_filter_takes_display_and_3d_controllers_only() {
        let filter = GpuFilter::nvidia();
        assert!(filter.matches(0x10de, 0x030200));
        assert!(filter.matches(0x10de, 0x030000));
        assert!(!filter.matches(0x10de, 0x040300), "the HD audio function of a card");
        assert!(!filter.matches(0x1002, 0x030000), "an AMD GPU");
        assert!(!filter.matches(0x10de, 0x068000), "an NVSwitch bridge");
    }

    #[test]
    fn vendor_labels_cover_the_three_gpu_vendors() {
        assert_eq!(vendor_label(0x10de), Some("nvidia"));
        assert_eq!(vendor_label(0x1002), Some("amd"));
        assert_eq!(vendor_label(0x8086), Some("intel"));
        assert_eq!(vendor_label(0x1af4), None);
    }
}
