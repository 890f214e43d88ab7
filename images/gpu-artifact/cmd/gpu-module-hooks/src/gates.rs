//! The Kubernetes feature gates the module relies on, what each one gives, and whether a running API
//! server has it on. Pure: the state comes from the server's `kubernetes_feature_enabled` series and
//! its minor version. docs/ADMIN_GUIDE.md carries the same table for admins; keep them in step.

use std::collections::BTreeMap;

/// A gate the module uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub name: &'static str,
    /// The first minor release where the gate is GA and locked on: a server of that release or newer has
    /// it on whatever its metrics say (a removed gate is no longer reported at all).
    pub locked_on_since: Option<u32>,
    /// What the cluster's users lose while the gate is off.
    pub without_it: &'static str,
}

pub const GATES: [Gate; 5] = [
    Gate {
        name: "DRAExtendedResource",
        locked_on_since: Some(37),
        without_it: "Pods cannot ask for GPUs as extended resources (gpu.deckhouse.io/<class>: N): the \
                     scheduler ignores DeviceClass.spec.extendedResourceName and such Pods stay Pending; \
                     ResourceClaims still work",
    },
    Gate {
        name: "DRAPartitionableDevices",
        locked_on_since: None,
        without_it: "no MIG partitions are offered (shared counters are dropped), only whole GPUs",
    },
    Gate {
        name: "DRAConsumableCapacity",
        locked_on_since: None,
        without_it: "no shared GPUs are offered (TimeSlicing and MPS shares by sharePercent)",
    },
    Gate {
        name: "DRADeviceTaints",
        locked_on_since: Some(37),
        without_it: "an unhealthy GPU is withdrawn from the offers instead of being tainted",
    },
    Gate {
        name: "ResourceHealthStatus",
        locked_on_since: None,
        without_it: "the health of a Pod's GPUs does not appear in its status (allocatedResourcesStatus)",
    },
];

/// The `kubernetes_feature_enabled{name=...}` samples of a metrics text: gate name to on/off.
pub fn reported_gates(metrics: &str) -> BTreeMap<String, bool> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("kubernetes_feature_enabled{"))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once('}')?;
            let value = value.trim().parse::<f64>().ok()?;
            let name = labels
                .split(',')
                .find_map(|label| label.trim().strip_prefix("name=\""))?
                .trim_end_matches('"');
            Some((name.to_owned(), value == 1.0))
        })
        .collect()
}

/// Whether `gate` is on for a server of minor `minor` that reported `reported`.
pub fn is_on(gate: &Gate, minor: u32, reported: &BTreeMap<String, bool>) -> bool {
    match reported.get(gate.name) {
        Some(on) => *on,
        None => gate.locked_on_since.is_some_and(|since| minor >= since),
    }
}

/// The minor version of `1.34.4` (also `v1.34.4`, `1.34`); None when it does not parse.
pub fn minor_of(version: &str) -> Option<u32> {
    version.trim_start_matches('v').split('.').nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP kubernetes_feature_enabled ...\n\
        kubernetes_feature_enabled{name=\"DRAPartitionableDevices\",stage=\"ALPHA\"} 1\n\
        kubernetes_feature_enabled{name=\"DRAConsumableCapacity\",stage=\"ALPHA\"} 0\n\
        kubernetes_feature_enabled{name=\"DRAExtendedResource\",stage=\"ALPHA\"} 1\n\
        apiserver_request_total{code=\"200\"} 12\n";

    fn gate(name: &str) -> Gate {
        *GATES.iter().find(|g| g.name == name).unwrap()
    }

    #[test]
    fn reported_values_decide_and_absent_gates_are_on_only_once_locked() {
        let reported = reported_gates(METRICS);
        assert_eq!(reported.len(), 3);
        assert!(is_on(&gate("DRAPartitionableDevices"), 34, &reported));
        assert!(!is_on(&gate("DRAConsumableCapacity"), 34, &reported));
        assert!(!is_on(&gate("DRADeviceTaints"), 34, &reported), "alpha and unreported");
        assert!(is_on(&gate("DRADeviceTaints"), 37, &reported), "GA and locked on");
        assert!(!is_on(&gate("ResourceHealthStatus"), 37, &reported), "never locked");
    }

    #[test]
    fn minor_versions_parse_with_or_without_v() {
        assert_eq!(minor_of("1.34.4"), Some(34));
        assert_eq!(minor_of("v1.37.2"), Some(37));
        assert_eq!(minor_of("1"), None);
    }
}
