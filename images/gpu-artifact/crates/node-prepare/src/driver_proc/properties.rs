//! Bad input by the thousand for the driver's `/proc` files: any `mig-minors` or `information`
//! text gives the minors it holds or a reason naming the missing entry, never a panic.

use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};

use super::{parse_device_minor, parse_mig_minors};

const LINES: &[&str] = &[
    "gpu0/gi1/access 12",
    "gpu0/gi1/ci0/access 13",
    "gpu0/gi1/access",
    "gpu0/gi1/ci0/access x",
    "gpu0/gi1/access  99999999999",
    "config 1",
    "gpu0/gi1/access 12 13",
    "Device Minor: 0",
    "Device Minor:",
    "Device Minor: -1",
    "",
    " ",
];

#[test]
fn property_any_mig_minors_text_gives_minors_or_names_the_entry() {
    let line = prop_oneof![4 => proptest::sample::select(LINES).prop_map(str::to_owned), 1 => any::<String>()];
    let inputs = (proptest::collection::vec(line, 0..20), 0u32..3, 0u32..3, 0u32..2);
    check(
        "mig-minors and information",
        file!(),
        inputs,
        |(lines, card, gi, ci)| {
            let text = lines.join("\n");
            let _ = parse_device_minor(&text);
            match parse_mig_minors(&text, card, gi, ci) {
                Ok((gi_minor, ci_minor)) => {
                    let listed = |key: String, minor: u32| {
                        lines.iter().any(|l| {
                            l.split_once(' ')
                                .is_some_and(|(k, v)| k == key && v.trim().parse() == Ok(minor))
                        })
                    };
                    ensure(
                        listed(format!("gpu{card}/gi{gi}/access"), gi_minor)
                            && listed(format!("gpu{card}/gi{gi}/ci{ci}/access"), ci_minor),
                        || format!("minors {gi_minor}/{ci_minor} not in {text:?}"),
                    )
                }
                Err(reason) => ensure(reason.starts_with("no minor for gpu"), || reason),
            }
        },
    );
}
