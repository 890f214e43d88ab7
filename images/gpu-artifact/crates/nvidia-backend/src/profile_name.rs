//! MIG profile names: from NVML's `name` field, or derived from memory.

/// NVML's profile name without a vendor prefix: `MIG 1g.10gb` -> `1g.10gb`.
pub fn strip_vendor_prefix(name: &str) -> String {
    let name = name.trim();
    name.strip_prefix("MIG ").unwrap_or(name).trim().to_owned()
}

/// The name NVIDIA's go-nvlib gives a GPU instance profile from its NVML
/// index, memory and the card's total memory (mig-profiles.md 3.3): the
/// memory fraction rounded up to eighths, times the card's GiB rounded up.
/// `None` for indices go-nvlib does not name.
pub fn derive_profile_name(profile_index: u32, memory_mib: u64, total_memory_mib: u64) -> Option<String> {
    let (compute_slices, attributes) = match profile_index {
        0x0 | 0x9 => (1, ""),
        0x1 => (2, ""),
        0x2 => (3, ""),
        0x3 => (4, ""),
        0x4 => (7, ""),
        0x5 => (8, ""),
        0x6 => (6, ""),
        0x7 => (1, "+me"),
        0x8 => (2, "+me"),
        0xA => (1, "+gfx"),
        0xB => (2, "+gfx"),
        0xC => (4, "+gfx"),
        0xD => (1, "-me"),
        0xE => (2, "-me"),
        0xF => (1, "+me.all"),
        0x10 => (2, "+me.all"),
        _ => return None,
    };
    if total_memory_mib == 0 {
        return None;
    }
    let fraction = memory_mib as f64 / total_memory_mib as f64;
    let eighths = (fraction * 8.0).ceil() / 8.0;
    let total_gib = (total_memory_mib as f64 / 1024.0).ceil();
    let gib = (eighths * total_gib).round() as u64;
    Some(format!("{compute_slices}g.{gib}gb{attributes}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_optional() {
        assert_eq!(strip_vendor_prefix("MIG 1g.10gb"), "1g.10gb");
        assert_eq!(strip_vendor_prefix("2g.12gb+me"), "2g.12gb+me");
    }

    #[test]
    fn derived_names_match_the_published_ones() {
        // Worked examples of mig-profiles.md 3.3.
        assert_eq!(derive_profile_name(0, 9984, 81559).as_deref(), Some("1g.10gb"));
        assert_eq!(derive_profile_name(9, 20096, 81559).as_deref(), Some("1g.20gb"));
        assert_eq!(derive_profile_name(2, 40448, 81559).as_deref(), Some("3g.40gb"));
        assert_eq!(derive_profile_name(4, 81152, 81559).as_deref(), Some("7g.80gb"));
        assert_eq!(derive_profile_name(7, 5952, 24576).as_deref(), Some("1g.6gb+me"));
        assert_eq!(derive_profile_name(3, 24064, 24576).as_deref(), Some("4g.24gb"));
        assert_eq!(derive_profile_name(0x11, 1024, 24576), None);
    }
}
