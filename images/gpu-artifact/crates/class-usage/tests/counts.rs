//! Counts of real publications: an A30 node as the handler publishes it (read through the NVIDIA
//! backend from the mock libnvidia-ml), in the 1.34 and 1.35+ layouts, with claims holding some of
//! its offers the way the scheduler writes allocations.

#[path = "../../dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

use class_usage::{ClassUsage, DeviceUsageIndex};
use dra_cel::SelectorCache;
use dra_offers::{Layout, OfferPolicy, PoolTarget, build_publication};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::json;

const ATTRS: &str = r#"device.attributes["gpu.deckhouse.io"]"#;

fn whole() -> Vec<String> {
    vec![
        r#"device.driver == "gpu.deckhouse.io""#.into(),
        format!(r#"{ATTRS}.deviceType == "Physical" && {ATTRS}.sharing == "Exclusive""#),
    ]
}

fn mig() -> Vec<String> {
    vec![
        r#"device.driver == "gpu.deckhouse.io""#.into(),
        format!(r#"{ATTRS}.deviceType == "MIG" && {ATTRS}.migProfile == "2g.12gb""#),
    ]
}

fn mps() -> Vec<String> {
    vec![
        r#"device.driver == "gpu.deckhouse.io""#.into(),
        format!(r#"{ATTRS}.sharing == "MPS""#),
    ]
}

fn a30_node(layout: Layout) -> Vec<ResourceSlice> {
    let cards = mock_cards::mock_cards("a30.yaml", "w1", "20b7", "a30-pcie");
    let policy = OfferPolicy::from_node_labels(None, None, Some("true"));
    let target = PoolTarget {
        node_name: "w1".into(),
        driver: "gpu.deckhouse.io".into(),
    };
    build_publication(&target, &cards, policy, layout)
        .unwrap()
        .at_generation(1)
}

/// A claim whose request `gpu` named `class` and got `device` (a share when `share_percent` is set).
fn claim(name: &str, class: &str, device: &str, share_percent: Option<u32>) -> ResourceClaim {
    let mut result = json!({"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": device});
    if let Some(percent) = share_percent {
        result["shareID"] = json!(format!("00000000-0000-0000-0000-0000000000{percent:02}"));
        result["consumedCapacity"] =
            json!({"gpu.deckhouse.io/sharePercent": percent.to_string(), "gpu.deckhouse.io/memory": "0"});
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }))
    .unwrap()
}

fn counts(slices: &[ResourceSlice], claims: &[ResourceClaim], class: &str, selectors: &[String]) -> (i64, i64, i64) {
    let index = DeviceUsageIndex::build(slices, claims);
    let ClassUsage {
        published,
        allocated,
        free,
        selector_error,
    } = index.usage(class, selectors, &SelectorCache::new());
    assert_eq!(selector_error, None);
    (published, allocated, free)
}

#[test]
fn an_idle_card_is_free_in_every_class_in_both_layouts() {
    for layout in [Layout::Combined, Layout::Split] {
        let slices = a30_node(layout);
        assert_eq!(counts(&slices, &[], "whole", &whole()), (1, 0, 1), "{layout:?}");
        assert_eq!(counts(&slices, &[], "mig", &mig()), (2, 0, 2), "{layout:?}");
        assert_eq!(counts(&slices, &[], "mps", &mps()), (1, 0, 1), "{layout:?}");
    }
}

#[test]
fn a_mig_partition_takes_the_whole_card_and_the_share_but_leaves_the_other_placement() {
    for layout in [Layout::Combined, Layout::Split] {
        let slices = a30_node(layout);
        let claims = [claim("train", "mig", "gpu0-mig-2g12gb-0", None)];
        assert_eq!(counts(&slices, &claims, "mig", &mig()), (2, 1, 1), "{layout:?}");
        assert_eq!(counts(&slices, &claims, "whole", &whole()), (1, 0, 0), "{layout:?}");
        assert_eq!(counts(&slices, &claims, "mps", &mps()), (1, 0, 0), "{layout:?}");
    }
}

#[test]
fn shares_count_their_device_once_and_leave_it_free_while_there_is_room() {
    let slices = a30_node(Layout::Split);
    let half = [claim("a", "mps", "gpu0-mps", Some(50))];
    assert_eq!(counts(&slices, &half, "mps", &mps()), (1, 1, 1));
    assert_eq!(counts(&slices, &half, "whole", &whole()), (1, 0, 0));
    let full = [
        claim("a", "mps", "gpu0-mps", Some(50)),
        claim("b", "mps", "gpu0-mps", Some(50)),
    ];
    assert_eq!(counts(&slices, &full, "mps", &mps()), (1, 1, 0));
}

#[test]
fn allocations_through_the_class_count_also_when_the_device_is_no_longer_published() {
    let slices = a30_node(Layout::Combined);
    let claims = [claim("vm", "whole", "gpu0", None)];
    assert_eq!(counts(&[], &claims, "whole", &whole()), (0, 1, 0));
    assert_eq!(counts(&slices, &claims, "whole", &whole()), (1, 1, 0));
    assert_eq!(counts(&slices, &claims, "other", &whole()), (1, 0, 0));
}

#[test]
fn incomplete_pools_are_not_counted_and_tainted_devices_are_not_free() {
    let mut slices = a30_node(Layout::Split);
    let incomplete = &slices[..1];
    assert_eq!(counts(incomplete, &[], "whole", &whole()), (0, 0, 0));
    for slice in &mut slices {
        for device in slice.spec.devices.iter_mut().flatten().filter(|d| d.name == "gpu0") {
            device.taints = Some(vec![
                serde_json::from_value(json!({"key": "gpu.deckhouse.io/xid", "value": "79", "effect": "NoSchedule"}))
                    .unwrap(),
            ]);
        }
    }
    assert_eq!(counts(&slices, &[], "whole", &whole()), (1, 0, 0));
}

#[test]
fn a_selector_that_fails_on_a_device_is_reported() {
    let slices = a30_node(Layout::Combined);
    let broken = vec![format!("{ATTRS}.noSuchAttribute == 1")];
    let usage = DeviceUsageIndex::build(&slices, &[]).usage("broken", &broken, &SelectorCache::new());
    let error = usage.selector_error.expect("a runtime error");
    assert!(error.contains("noSuchAttribute"), "{error}");
}
