//! What the NVIDIA kernel driver tells under `/proc` about device nodes: a
//! card's minor (`/dev/nvidia<minor>`) and the minors of the MIG capability
//! nodes (`/dev/nvidia-caps/nvidia-cap<minor>`) that grant access to one GPU
//! instance and one compute instance.

use std::fs;
use std::path::Path;

use gpu_vendor::PciAddress;

use crate::config::NodePrepareConfig;
use crate::error::PrepareError;

const MIG_MINORS: &str = "/proc/driver/nvidia-caps/mig-minors";

/// The card's device minor, from the `Device Minor:` line of
/// `/proc/driver/nvidia/gpus/<pci address>/information`.
pub(crate) fn card_minor(config: &NodePrepareConfig, card: &PciAddress) -> Result<u32, PrepareError> {
    let path = config.host_path(format!("/proc/driver/nvidia/gpus/{card}/information"));
    let text = read(&path)?;
    parse_device_minor(&text).ok_or_else(|| PrepareError::HostFile {
        path,
        reason: "no readable `Device Minor:` line".into(),
    })
}

/// The number of the first `Device Minor:` line.
pub(crate) fn parse_device_minor(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|line| line.strip_prefix("Device Minor:"))
        .and_then(|value| value.trim().parse().ok())
}

/// The capability minors of GPU instance `gi` and its compute instance `ci`
/// on the card with device minor `card_minor`.
pub(crate) fn mig_capability_minors(
    config: &NodePrepareConfig,
    card_minor: u32,
    gi: u32,
    ci: u32,
) -> Result<(u32, u32), PrepareError> {
    let path = config.host_path(MIG_MINORS);
    let text = read(&path)?;
    parse_mig_minors(&text, card_minor, gi, ci).map_err(|reason| PrepareError::HostFile { path, reason })
}

/// The minors of `gpu<card>/gi<gi>/access` and `gpu<card>/gi<gi>/ci<ci>/access` in the text of
/// `mig-minors` (`<name> <minor>` a line); the reason names the entry that is missing or unreadable.
pub(crate) fn parse_mig_minors(text: &str, card_minor: u32, gi: u32, ci: u32) -> Result<(u32, u32), String> {
    let gi_key = format!("gpu{card_minor}/gi{gi}/access");
    let ci_key = format!("gpu{card_minor}/gi{gi}/ci{ci}/access");
    let find = |key: &str| {
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .find(|(name, _)| *name == key)
            .and_then(|(_, minor)| minor.trim().parse().ok())
            .ok_or_else(|| format!("no minor for {key}"))
    };
    Ok((find(&gi_key)?, find(&ci_key)?))
}

fn read(path: &Path) -> Result<String, PrepareError> {
    fs::read_to_string(path).map_err(PrepareError::io("read", path))
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests {
    use super::*;
    use host_fixtures::NamedHost;

    #[test]
    fn reads_the_minors_the_driver_publishes() {
        let host = NamedHost::A30Pcie.build();
        let config = NodePrepareConfig::new("w1", host.root());
        let card: PciAddress = "0000:01:00.0".parse().unwrap();
        assert_eq!(card_minor(&config, &card).unwrap(), 0);
        assert_eq!(mig_capability_minors(&config, 0, 1, 0).unwrap(), (12, 13));
        assert_eq!(mig_capability_minors(&config, 3, 3, 3).unwrap(), (435, 439));
    }

    #[test]
    fn a_missing_or_unreadable_minor_names_the_file() {
        let host = NamedHost::A30Pcie.build();
        let config = NodePrepareConfig::new("w1", host.root());
        let absent: PciAddress = "0000:02:00.0".parse().unwrap();
        let error = card_minor(&config, &absent).unwrap_err().to_string();
        assert!(error.contains("gpus/0000:02:00.0/information"), "{error}");

        host.write_file("proc/driver/nvidia/gpus/0000:01:00.0/information", "Bus Type: PCIe\n");
        let card: PciAddress = "0000:01:00.0".parse().unwrap();
        let error = card_minor(&config, &card).unwrap_err().to_string();
        assert!(error.contains("Device Minor"), "{error}");
        let error = mig_capability_minors(&config, 32, 0, 0).unwrap_err().to_string();
        assert!(error.contains("no minor for gpu32/gi0/access"), "{error}");
    }
}
