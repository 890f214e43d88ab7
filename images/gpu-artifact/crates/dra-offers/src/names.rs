//! Every name publication writes: the pool, slices, counter sets, counters and devices. They are
//! pure functions of the node and the card, so a restarted handler derives the same names and the
//! prepare side can resolve a device name it did not publish itself.

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::{MigPlacement, PciAddress};

/// The domain of our attributes and capacities (the driver's own domain).
pub const ATTRIBUTE_DOMAIN: &str = "gpu.deckhouse.io";

const DNS_LABEL_MAX: usize = 63;
const DNS_SUBDOMAIN_MAX: usize = 253;
/// Room kept at the end of a slice name for `-<index>`.
const SLICE_INDEX_ROOM: usize = 6;

/// `gpus/<node>`: one pool per node. A node name too long for the 253-character pool name is
/// shortened with a hash (see [`shortened`]).
pub fn pool_name(node: &str) -> String {
    format!("gpus/{}", shortened(node, DNS_SUBDOMAIN_MAX - "gpus/".len()))
}

/// `<node>-<driver>-<k>`, the `k`-th slice of the node's pool; shortened like [`pool_name`] when
/// the node name is long, so it stays a DNS subdomain of at most 253 characters.
pub fn slice_name(node: &str, driver: &str, k: usize) -> String {
    let base = format!("{node}-{driver}");
    format!("{}-{k}", shortened(&base, DNS_SUBDOMAIN_MAX - SLICE_INDEX_ROOM))
}

/// `pgpu-<pci address with ':' and '.' as '-'>`, e.g. `pgpu-0000-01-00-0`.
pub fn counter_set_name(pci_address: &PciAddress) -> String {
    format!("pgpu-{}", pci_address.to_string().replace([':', '.'], "-"))
}

/// `memory-slice-<i>`: the counter of one MIG memory slice.
pub fn memory_slice_counter(slice: u32) -> String {
    format!("memory-slice-{slice}")
}

/// `gpu<index>`: the whole card.
pub fn physical_device_name(index: u32) -> String {
    format!("gpu{index}")
}

/// `gpu<index>-timeslicing` or `gpu<index>-mps`: the whole card shared with that strategy
/// (`Exclusive` is the plain [`physical_device_name`]).
pub fn shared_device_name(index: u32, strategy: SharingStrategy) -> String {
    match strategy {
        SharingStrategy::Exclusive => physical_device_name(index),
        SharingStrategy::TimeSlicing => format!("gpu{index}-timeslicing"),
        SharingStrategy::Mps => format!("gpu{index}-mps"),
    }
}

/// `gpu<index>-mig-<profile label>-<placement start>`, e.g. `gpu0-mig-1g6gb-me-3`.
pub fn mig_device_name(index: u32, profile_name: &str, placement: MigPlacement) -> String {
    format!("gpu{index}-mig-{}-{}", profile_label(profile_name), placement.start)
}

/// A vendor profile name as a DNS label part: lower case, dots dropped, anything else that is not
/// alphanumeric becomes `-` (`2g.12gb` -> `2g12gb`, `1g.6gb+me` -> `1g6gb-me`).
pub fn profile_label(profile_name: &str) -> String {
    profile_name
        .chars()
        .filter(|c| *c != '.')
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// A DNS label (RFC 1123): 1-63 characters of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= DNS_LABEL_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A DNS subdomain: at most 253 characters of DNS labels joined by dots.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= DNS_SUBDOMAIN_MAX && name.split('.').all(is_dns_label)
}

/// `name` itself when it fits in `max` characters; otherwise a prefix of it, cut where it still
/// ends alphanumeric, then `-` and 8 hex digits of a hash of the whole name, so two long names that
/// share a prefix stay apart.
fn shortened(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = format!("{:08x}", fnv1a(name) as u32);
    let prefix = name[..max - hash.len() - 1].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// FNV-1a: a stable hash (std's `DefaultHasher` may change between Rust releases, and the names
/// must not change when the handler is rebuilt).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_become_dns_labels() {
        assert_eq!(profile_label("2g.12gb"), "2g12gb");
        assert_eq!(profile_label("1g.6gb+me"), "1g6gb-me");
        assert_eq!(profile_label("7g.80GB"), "7g80gb");
    }

    #[test]
    fn device_and_counter_set_names() {
        let pci: PciAddress = "0000:01:00.0".parse().unwrap();
        assert_eq!(counter_set_name(&pci), "pgpu-0000-01-00-0");
        assert_eq!(physical_device_name(3), "gpu3");
        assert_eq!(shared_device_name(3, SharingStrategy::TimeSlicing), "gpu3-timeslicing");
        assert_eq!(shared_device_name(3, SharingStrategy::Mps), "gpu3-mps");
        assert_eq!(shared_device_name(3, SharingStrategy::Exclusive), "gpu3");
        let placement = MigPlacement { start: 2, size: 2 };
        assert_eq!(mig_device_name(0, "2g.12gb+me", placement), "gpu0-mig-2g12gb-me-2");
        let names = [
            counter_set_name(&pci),
            mig_device_name(7, "1g.10gb+me", placement),
            shared_device_name(7, SharingStrategy::TimeSlicing),
        ];
        for name in names {
            assert!(is_dns_label(&name), "{name}");
        }
    }

    #[test]
    fn dns_label_rules() {
        assert!(is_dns_label("gpu0-mig-1g6gb-me-3"));
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns_subdomain("node-a.example-gpu.deckhouse.io-0"));
        assert!(!is_dns_subdomain("node..a"));
    }

    #[test]
    fn short_node_names_are_kept() {
        assert_eq!(pool_name("node-a"), "gpus/node-a");
        assert_eq!(slice_name("node-a", "gpu.deckhouse.io", 2), "node-a-gpu.deckhouse.io-2");
    }

    #[test]
    fn long_node_names_are_shortened_to_valid_distinct_names() {
        let label = "a".repeat(63);
        let four_labels = [label.as_str(); 4].join(".");
        let long_node = &four_labels[..253];
        // The same up to the last character, which the shortened prefix cuts away.
        let other_node = format!("{}b", &long_node[..252]);
        let name = slice_name(long_node, "gpu.deckhouse.io", 12);
        assert!(name.len() <= 253 && is_dns_subdomain(&name), "{name}");
        assert_ne!(name, slice_name(&other_node, "gpu.deckhouse.io", 12));
        let pool = pool_name(long_node);
        assert!(pool.len() <= 253, "{pool}");
        assert!(is_dns_subdomain(pool.strip_prefix("gpus/").unwrap()), "{pool}");
        assert_eq!(name, slice_name(long_node, "gpu.deckhouse.io", 12), "stable");
    }
}
