//! The normalised model name written to the `gpu.deckhouse.io/device` label
//! and the `device` attribute, e.g. `a30-pcie`.
//!
//! The rule, applied to the device's pci.ids name:
//! 1. Take the marketing name: the text inside the last `[...]` when the name
//!    has one (`GA100GL [A30 PCIe]` -> `A30 PCIe`), else the whole name
//!    (`AD102 High Definition Audio Controller`).
//! 2. Lower-case it, turn every run of characters other than `a-z` and `0-9`
//!    into one `-`, and trim `-` from both ends (`A100 SXM4 80GB` ->
//!    `a100-sxm4-80gb`, `L6000 / RTX 6000 Ada Generation` ->
//!    `l6000-rtx-6000-ada-generation`).
//! 3. Cut it to 63 characters, the limit of a label value, and trim a `-`
//!    the cut leaves at the end.
//! 4. When the name is unknown (no pci.ids, or the device is newer than the
//!    database) or nothing is left, use the ids: `<vendor>-<device>` in
//!    lower-case hex, e.g. `10de-2331`.
//!
//! The result is always a valid label value: it starts and ends with an
//! alphanumeric character and holds only `[a-z0-9-]`. It depends on the
//! pci.ids version only through the name: two nodes with different
//! databases can label the same card differently, which is why the ids stay
//! in `pciInfo` and in the object name.

/// Kubernetes' limit for a label value.
const MAX_LABEL_VALUE: usize = 63;

/// The normalised model of a device with this pci.ids name (if known) and these ids.
pub fn model_label(device_name: Option<&str>, vendor: u16, device: u16) -> String {
    let normalised = device_name.map(marketing_name).map(normalise).unwrap_or_default();
    if normalised.is_empty() {
        format!("{vendor:04x}-{device:04x}")
    } else {
        normalised
    }
}

fn marketing_name(name: &str) -> &str {
    let bracketed = name
        .rfind('[')
        .and_then(|open| name[open + 1..].find(']').map(|len| &name[open + 1..open + 1 + len]));
    match bracketed {
        Some(inside) if inside.chars().any(|c| c.is_ascii_alphanumeric()) => inside,
        _ => name,
    }
}

fn normalise(name: &str) -> String {
    let mut label = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            label.push(c.to_ascii_lowercase());
        } else if !label.is_empty() && !label.ends_with('-') {
            label.push('-');
        }
    }
    label.truncate(MAX_LABEL_VALUE);
    while label.ends_with('-') {
        label.pop();
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_centre_cards_take_their_bracketed_marketing_name() {
        // Device names exactly as pci.ids 2023.04.10 spells them.
        let cases = [
            ("GA100GL [A30 PCIe]", "a30-pcie"),
            ("GA100 [A100 SXM4 80GB]", "a100-sxm4-80gb"),
            ("GA100 [A100 PCIe 80GB]", "a100-pcie-80gb"),
            ("GA100 [A100-SXM-64GB]", "a100-sxm-64gb"),
            ("GH100 [H100 PCIe]", "h100-pcie"),
            ("GH100[H100 SXM5 80GB]", "h100-sxm5-80gb"),
            ("TU104GL [Tesla T4]", "tesla-t4"),
            ("AD102 [GeForce RTX 4090]", "geforce-rtx-4090"),
            (
                "AD102GL [L6000 / RTX 6000 Ada Generation]",
                "l6000-rtx-6000-ada-generation",
            ),
            (
                "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]",
                "radeon-rx-6800-6800-xt-6900-xt",
            ),
        ];
        for (name, label) in cases {
            assert_eq!(model_label(Some(name), 0x10de, 0x20b7), label, "{name}");
        }
    }

    #[test]
    fn names_without_brackets_are_used_whole() {
        assert_eq!(model_label(Some("GH100"), 0x10de, 0x2302), "gh100");
        assert_eq!(
            model_label(Some("AD102 High Definition Audio Controller"), 0x10de, 0x22ba),
            "ad102-high-definition-audio-controller"
        );
        assert_eq!(model_label(Some("Weird [---]"), 0x10de, 0x0001), "weird");
    }

    #[test]
    fn unknown_or_empty_names_fall_back_to_the_ids() {
        assert_eq!(model_label(None, 0x10de, 0x2331), "10de-2331");
        assert_eq!(model_label(Some(" [] / "), 0x10de, 0x2331), "10de-2331");
    }

    #[test]
    fn long_names_are_cut_to_a_valid_label_value() {
        let long = format!("X [{}]", "Ultra ".repeat(20));
        let label = model_label(Some(&long), 0x10de, 0x1234);
        assert!(label.len() <= 63, "{label}");
        assert!(label.ends_with(|c: char| c.is_ascii_alphanumeric()), "{label}");
        assert!(label.starts_with("ultra-ultra-"));
    }
}
