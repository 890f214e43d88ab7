//! `selector.matchLabels` over PhysicalGPU labels and `names`, turned into what a selector can test
//! on a device. Labels the devices also carry as attributes (`gpu.deckhouse.io/vendor`,
//! `gpu.deckhouse.io/device`) become attribute comparisons, so they scale to any cluster; any other
//! label (the node, or one an admin put on PhysicalGPUs) is resolved to the names of the PhysicalGPUs
//! that carry it now, which the devices' `physicalGPU` attribute is compared with. The controller
//! renders again when PhysicalGPUs change.

use std::collections::BTreeSet;

use gpu_api::{GPUClassSpec, PhysicalGPU, labels};
use kube::ResourceExt;

/// PhysicalGPU labels that every device of the card carries as an attribute of the same value.
const LABEL_ATTRIBUTES: [(&str, &str); 2] = [(labels::VENDOR, "vendor"), (labels::DEVICE, "device")];

/// What the labels and names of a class select.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelection {
    /// (attribute, value) comparisons.
    pub attributes: Vec<(&'static str, String)>,
    /// The PhysicalGPUs the class is limited to, sorted; `None` when neither `names` nor a label
    /// without an attribute limits it.
    pub physical_gpus: Option<Vec<String>>,
    /// Keys of `matchLabels` that no PhysicalGPU carries (a typo, or labels not put on yet).
    pub missing_keys: Vec<String>,
}

/// Resolves `spec`'s `selector.matchLabels` and `names` against the cluster's PhysicalGPUs.
pub fn select(spec: &GPUClassSpec, gpus: &[&PhysicalGPU]) -> LabelSelection {
    let match_labels = spec.selector.as_ref().map(|s| &s.match_labels);
    let mut selection = LabelSelection::default();
    let mut other_labels = Vec::new();
    for (key, value) in match_labels.into_iter().flatten() {
        if !gpus.iter().any(|gpu| gpu.labels().contains_key(key)) {
            selection.missing_keys.push(key.clone());
        }
        match LABEL_ATTRIBUTES.iter().find(|(label, _)| label == key) {
            Some((_, attribute)) => selection.attributes.push((attribute, value.clone())),
            None => other_labels.push((key, value)),
        }
    }
    if spec.names.is_none() && other_labels.is_empty() {
        return selection;
    }
    let named: Option<BTreeSet<&str>> = spec.names.as_ref().map(|n| n.iter().map(String::as_str).collect());
    let names: BTreeSet<String> = if other_labels.is_empty() {
        // Names alone: kept as written, also those of cards that are not there yet.
        named.into_iter().flatten().map(str::to_owned).collect()
    } else {
        gpus.iter()
            .filter(|gpu| {
                other_labels
                    .iter()
                    .all(|(key, value)| gpu.labels().get(*key) == Some(*value))
            })
            .map(|gpu| gpu.name_any())
            .filter(|name| named.as_ref().is_none_or(|named| named.contains(name.as_str())))
            .collect()
    };
    selection.physical_gpus = Some(names.into_iter().collect());
    selection
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gpu_api::{ClassDeviceType, PhysicalGpuSelector};

    use super::*;

    fn gpu(name: &str, labels: &[(&str, &str)]) -> PhysicalGPU {
        let mut gpu = PhysicalGPU::new(name, Default::default());
        gpu.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        gpu
    }

    fn spec(labels: &[(&str, &str)], names: Option<&[&str]>) -> GPUClassSpec {
        GPUClassSpec {
            device_type: ClassDeviceType::Physical,
            selector: Some(PhysicalGpuSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            }),
            names: names.map(|n| n.iter().map(|s| s.to_string()).collect()),
            ..GPUClassSpec::default()
        }
    }

    fn cluster() -> Vec<PhysicalGPU> {
        vec![
            gpu(
                "w1-0-10de-20b7",
                &[(labels::DEVICE, "a30-pcie"), (labels::NODE, "w1"), ("team", "ml")],
            ),
            gpu("w1-1-10de-20b7", &[(labels::DEVICE, "a30-pcie"), (labels::NODE, "w1")]),
            gpu(
                "w2-0-10de-2330",
                &[(labels::DEVICE, "h100-sxm5-80gb"), (labels::NODE, "w2"), ("team", "ml")],
            ),
        ]
    }

    #[test]
    fn attribute_labels_become_comparisons_and_others_become_names() {
        let gpus = cluster();
        let refs: Vec<_> = gpus.iter().collect();
        let selection = select(&spec(&[(labels::DEVICE, "a30-pcie"), ("team", "ml")], None), &refs);
        assert_eq!(selection.attributes, [("device", "a30-pcie".to_owned())]);
        assert_eq!(
            selection.physical_gpus,
            Some(vec!["w1-0-10de-20b7".to_owned(), "w2-0-10de-2330".to_owned()])
        );
        assert!(selection.missing_keys.is_empty());
    }

    #[test]
    fn names_limit_label_matches_and_stand_alone_as_written() {
        let gpus = cluster();
        let refs: Vec<_> = gpus.iter().collect();
        let both = select(
            &spec(&[(labels::NODE, "w1")], Some(&["w1-1-10de-20b7", "w2-0-10de-2330"])),
            &refs,
        );
        assert_eq!(both.physical_gpus, Some(vec!["w1-1-10de-20b7".to_owned()]));
        let alone = select(&spec(&[], Some(&["future-0-10de-20b7"])), &refs);
        assert_eq!(alone.physical_gpus, Some(vec!["future-0-10de-20b7".to_owned()]));
        assert_eq!(
            select(&spec(&[(labels::VENDOR, "nvidia")], None), &refs).physical_gpus,
            None
        );
    }

    #[test]
    fn keys_no_physical_gpu_carries_are_reported() {
        let gpus = cluster();
        let refs: Vec<_> = gpus.iter().collect();
        let selection = select(&spec(&[("gpu.deckhouse.io/model", "a30"), ("team", "ml")], None), &refs);
        assert_eq!(selection.missing_keys, ["gpu.deckhouse.io/model"]);
    }
}
