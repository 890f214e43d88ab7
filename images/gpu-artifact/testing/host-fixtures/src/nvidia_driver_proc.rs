//! What the NVIDIA kernel driver and the kernel publish under `/proc` that the
//! node's prepare pipeline reads: each card's `information` file (its device
//! minor, hence `/dev/nvidia<minor>`), the static MIG capability minor table
//! `nvidia-caps/mig-minors`, and the kernel's `boot_id`.
//!
//! The minor table follows the real driver (NVIDIA MIG user guide, "/dev
//! based nvidia-capabilities"): `config 1`, `monitor 2`, then for every
//! possible GPU minor 0..32 and GPU instance 0..15 the instance's `access`
//! minor followed by its eight compute instances' ones, sequentially, ending at
//! `gpu31/gi14/ci7/access 4322`.

use std::fmt::Write as _;

use crate::fixture_device::NVIDIA;
use crate::host_tree::HostTree;

/// The boot id the named fixtures carry (`/proc/sys/kernel/random/boot_id`).
pub const FIXTURE_BOOT_ID: &str = "6f1c1f5e-3b7a-4f4e-9d55-0b8f1f2a6c01";

/// Where the driver publishes the MIG capability minors.
pub const MIG_MINORS_PATH: &str = "proc/driver/nvidia-caps/mig-minors";

/// GPU minors the driver reserves capability minors for.
const MIG_MINOR_GPUS: u32 = 32;
/// GPU instances per GPU in the table.
const MIG_MINOR_GPU_INSTANCES: u32 = 15;
/// Compute instances per GPU instance in the table.
const MIG_MINOR_COMPUTE_INSTANCES: u32 = 8;

impl HostTree {
    /// `/proc/sys/kernel/random/boot_id`, newline-terminated as the kernel prints it.
    pub fn write_boot_id(&self, boot_id: &str) {
        self.write_file("proc/sys/kernel/random/boot_id", format!("{boot_id}\n"));
    }

    /// What the loaded nvidia module shows under `/proc/driver`: an
    /// `information` file per NVIDIA device bound to `nvidia` (device minors
    /// in PCI address order, as the driver probes them) and the MIG minor
    /// table. A tree without such a device gets neither.
    pub fn install_nvidia_driver_proc(&self) {
        let cards: Vec<String> = self
            .devices()
            .into_iter()
            .filter(|device| device.vendor == NVIDIA && device.driver.as_deref() == Some("nvidia"))
            .map(|device| device.address)
            .collect();
        for (minor, address) in cards.iter().enumerate() {
            self.write_file(
                format!("proc/driver/nvidia/gpus/{address}/information"),
                nvidia_information(address, minor as u32),
            );
        }
        if !cards.is_empty() {
            self.write_file(MIG_MINORS_PATH, mig_minors_table());
        }
    }
}

/// A card's `information` file in the driver's layout (only the lines that do
/// not need a model name; the pipeline reads `Device Minor`).
fn nvidia_information(address: &str, minor: u32) -> String {
    format!(
        "Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {address}\n\
         Device Minor: \t {minor}\nGPU Excluded:\t No\n"
    )
}

/// The driver's static MIG capability minor table.
pub fn mig_minors_table() -> String {
    let mut table = String::from("config 1\nmonitor 2\n");
    let mut minor = 3;
    for gpu in 0..MIG_MINOR_GPUS {
        for gi in 0..MIG_MINOR_GPU_INSTANCES {
            let _ = writeln!(table, "gpu{gpu}/gi{gi}/access {minor}");
            minor += 1;
            for ci in 0..MIG_MINOR_COMPUTE_INSTANCES {
                let _ = writeln!(table, "gpu{gpu}/gi{gi}/ci{ci}/access {minor}");
                minor += 1;
            }
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named_hosts::{DGX_A100_GPU_ADDRESSES, NamedHost};

    #[test]
    fn the_minor_table_matches_the_drivers_first_and_last_lines() {
        let table = mig_minors_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            &lines[..5],
            [
                "config 1",
                "monitor 2",
                "gpu0/gi0/access 3",
                "gpu0/gi0/ci0/access 4",
                "gpu0/gi0/ci1/access 5"
            ]
        );
        assert!(lines.contains(&"gpu0/gi1/access 12"));
        assert!(lines.contains(&"gpu0/gi1/ci0/access 13"));
        assert!(lines.contains(&"gpu3/gi3/ci3/access 439"));
        assert!(lines.contains(&"gpu6/gi11/ci7/access 920"));
        assert_eq!(lines.last(), Some(&"gpu31/gi14/ci7/access 4322"));
    }

    #[test]
    fn nvidia_cards_get_minors_in_address_order() {
        let host = NamedHost::A100SxmX8.build();
        for (minor, address) in DGX_A100_GPU_ADDRESSES.iter().enumerate() {
            let info =
                std::fs::read_to_string(host.path(format!("proc/driver/nvidia/gpus/{address}/information"))).unwrap();
            assert!(info.contains(&format!("Device Minor: \t {minor}\n")), "{info}");
            assert!(info.contains(&format!("Bus Location: \t {address}\n")), "{info}");
        }
        assert!(host.path(MIG_MINORS_PATH).exists());
        assert_eq!(
            std::fs::read_to_string(host.path("proc/sys/kernel/random/boot_id")).unwrap(),
            format!("{FIXTURE_BOOT_ID}\n")
        );
    }

    #[test]
    fn hosts_without_an_nvidia_bound_card_get_no_driver_files() {
        let host = NamedHost::NonNvidiaGpu.build();
        assert!(!host.path("proc/driver/nvidia").exists());
        assert!(!host.path(MIG_MINORS_PATH).exists());
        let consumer = NamedHost::ConsumerWithAudio.build();
        assert!(
            consumer
                .path("proc/driver/nvidia/gpus/0000:01:00.0/information")
                .exists()
        );
        assert!(!consumer.path("proc/driver/nvidia/gpus/0000:01:00.1").exists());
    }
}
