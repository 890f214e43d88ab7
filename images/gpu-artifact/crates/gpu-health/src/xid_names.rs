//! What an Xid means, in a few words an administrator recognises: NVIDIA's Xid catalogue and the
//! mnemonics of its `nverror.h` (mig-profiles.md 6.2). Xids not listed are named by number only.

/// A short description of `xid`, e.g. `double-bit ECC error` for 48.
pub fn xid_description(xid: u64) -> Option<&'static str> {
    Some(match xid {
        8 => "GPU stopped processing (channel idle timeout)",
        13 => "graphics engine exception",
        31 => "GPU memory page fault",
        32 => "invalid or corrupted push buffer stream",
        43 => "GPU stopped processing",
        45 => "preemptive cleanup after previous errors",
        46 => "GPU timeout",
        48 => "double-bit ECC error",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remapping recorded",
        64 => "ECC page retirement or row remapping failure",
        68 => "video processor exception",
        69 => "graphics engine class error",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        109 => "context switch timeout",
        119 => "GSP RPC timeout",
        120 => "GSP error",
        121 => "C2C link error",
        140 => "unrecovered ECC error",
        143 => "GPU initialization failure",
        154 => "GPU recovery action changed",
        _ => return None,
    })
}

/// `Xid 48 (double-bit ECC error)`, or `Xid 200` when the Xid is not in the table.
pub fn xid_label(xid: u64) -> String {
    match xid_description(xid) {
        Some(description) => format!("Xid {xid} ({description})"),
        None => format!("Xid {xid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_xids_carry_their_meaning() {
        assert_eq!(xid_label(79), "Xid 79 (GPU has fallen off the bus)");
        assert_eq!(xid_label(999), "Xid 999");
    }
}
