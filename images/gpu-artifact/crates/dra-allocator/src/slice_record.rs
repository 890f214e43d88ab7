//! One ResourceSlice, parsed once when it arrives: its counter sets and devices in the engine's
//! shared form (see `device`, `intern`), its node selection, and the first problem that makes its
//! pool unusable (a bad quantity, no node selection). Which counter set a device consumes is
//! resolved later, per pool (`pool`): in the 1.35+ layout the sets come in other slices.

use std::collections::BTreeMap;
use std::sync::Arc;

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};

use crate::device::{Amounts, Attr, AttrList, AttrValue, Attributes, Capacity, Consumes, Kind, Placement, RawDevice};
use crate::intern::Dedup;
use crate::node_selection::NodeBinding;

/// A counter set as published: counters in name order.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct CounterList(pub Box<[(Arc<str>, Quantity)]>);

pub(crate) struct CounterSetDef {
    pub name: Arc<str>,
    pub counters: Arc<CounterList>,
}

/// The shared-copy tables of one engine.
#[derive(Default)]
pub(crate) struct Tables {
    pub strings: Dedup<str>,
    pub attrs: Dedup<Attr>,
    pub attributes: Dedup<AttrList>,
    pub amounts: Dedup<Amounts>,
    pub consumes: Dedup<Consumes>,
    pub kinds: Dedup<Kind>,
    pub counters: Dedup<CounterList>,
    pub capacities: BTreeMap<String, Arc<Capacity>>,
}

impl Tables {
    /// Drops what no device holds any more: holders first, so the strings they held go too.
    pub(crate) fn prune(&mut self) {
        self.kinds.prune();
        self.attributes.prune();
        self.attrs.prune();
        self.consumes.prune();
        self.amounts.prune();
        self.counters.prune();
        self.capacities.retain(|_, c| Arc::strong_count(c) > 1);
        self.strings.prune();
    }
}

pub(crate) struct SliceRecord {
    pub name: Arc<str>,
    pub generation: i64,
    pub count: i64,
    pub has_devices: bool,
    pub counter_sets: Vec<CounterSetDef>,
    /// The first problem with a counter set, then with a device (position, reason).
    pub set_error: Option<String>,
    pub device_error: Option<(usize, String)>,
    /// Slots of this slice's devices in the engine (filled by the inventory).
    pub devices: Vec<u32>,
}

fn parse(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, what: &str) -> Result<Quantity, String> {
    Quantity::parse(&q.0).map_err(|e| format!("{what}: {e}"))
}

fn binding_of(slice: &ResourceSlice, device: &Device) -> Result<NodeBinding, String> {
    let spec = &slice.spec;
    let (name, all, selector) = if spec.per_device_node_selection == Some(true) {
        (&device.node_name, device.all_nodes, &device.node_selector)
    } else {
        (&spec.node_name, spec.all_nodes, &spec.node_selector)
    };
    match (name, all, selector) {
        (Some(n), None | Some(false), None) if !n.is_empty() => Ok(NodeBinding::Node(n.clone())),
        (None, Some(true), None) => Ok(NodeBinding::AllNodes),
        (None, None | Some(false), Some(s)) => Ok(NodeBinding::Selector(s.clone())),
        _ => Err("exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required".to_owned()),
    }
}

/// The slice's node selection when it is one for all devices, else `None`.
fn slice_binding(slice: &ResourceSlice) -> Option<NodeBinding> {
    if slice.spec.per_device_node_selection == Some(true) {
        return None;
    }
    binding_of(slice, &Device::default()).ok()
}

/// Attribute pairs shared by every device of a group (devices consuming the same first counter
/// set): they are held once for the card.
fn common_attributes<'d>(devices: &[&'d Device]) -> BTreeMap<&'d str, &'d DeviceAttribute> {
    let mut common: BTreeMap<&str, &DeviceAttribute> = devices[0]
        .attributes
        .iter()
        .flatten()
        .map(|(n, v)| (n.as_str(), v))
        .collect();
    for device in &devices[1..] {
        let attributes = device.attributes.as_ref();
        common.retain(|name, value| attributes.and_then(|a| a.get(*name)) == Some(*value));
    }
    common
}

fn attr_list(pairs: Vec<(&str, &DeviceAttribute)>, tables: &mut Tables) -> Arc<AttrList> {
    let list = AttrList(
        pairs
            .into_iter()
            .map(|(n, v)| {
                let attr = Attr(tables.strings.str(n), AttrValue::of(v, &mut tables.strings));
                tables.attrs.value(attr)
            })
            .collect(),
    );
    tables.attributes.value(list)
}

fn device_of(
    slice: &ResourceSlice,
    shared_binding: &Option<Arc<NodeBinding>>,
    device: &Device,
    common: &BTreeMap<&str, &DeviceAttribute>,
    common_list: &Arc<AttrList>,
    shared_placement: &mut Option<Arc<Placement>>,
    tables: &mut Tables,
) -> Result<RawDevice, String> {
    let binding = binding_of(slice, device)?;
    let mut capacity = Vec::new();
    let mut key = String::new();
    for (name, cap) in device.capacity.iter().flatten() {
        let value = parse(&cap.value, &format!("capacity {name}"))?;
        key.push_str(&format!("{name}={value:?}{:?};", cap.request_policy));
        capacity.push((tables.strings.str(name), value, cap.request_policy.clone()));
    }
    let capacity = match tables.capacities.get(&key) {
        Some(found) => Arc::clone(found),
        None => {
            let made = Arc::new(Capacity(capacity.into()));
            tables.capacities.insert(key, Arc::clone(&made));
            made
        }
    };
    let mut consumes = Vec::new();
    let mut memory_slices = 0u16;
    for consumption in device.consumes_counters.iter().flatten() {
        let mut amounts = Vec::new();
        for (name, counter) in &consumption.counters {
            let amount = parse(&counter.value, &format!("counter {name}"))?;
            if name.starts_with("memory-slice") && !amount.is_zero() {
                memory_slices += 1;
            }
            amounts.push((tables.strings.str(name), amount));
        }
        let amounts = tables.amounts.value(Amounts(amounts.into()));
        consumes.push((tables.strings.str(&consumption.counter_set), amounts));
    }
    let own: Vec<(&str, &DeviceAttribute)> = device
        .attributes
        .iter()
        .flatten()
        .filter(|(n, _)| !common.contains_key(n.as_str()))
        .map(|(n, v)| (n.as_str(), v))
        .collect();
    let own = attr_list(own, tables);
    let attributes = Attributes {
        common: common_list,
        own: &own,
    };
    let is_mig = attributes.iter().any(|(name, value)| {
        (name == "deviceType" || name == "gpu.deckhouse.io/deviceType") && value.as_str() == Some("MIG")
    });
    let places_itself = crate::topology::publishes_a_place(&own);
    let kind = Kind {
        name: tables.strings.str(&device.name),
        taints: device
            .taints
            .as_ref()
            .filter(|t| !t.is_empty())
            .map(|t| Arc::new(t.clone())),
        own,
        capacity,
        consumes: tables.consumes.value(Consumes(consumes.into())),
        memory_slices,
        shared: device.allow_multiple_allocations == Some(true),
        has_binding_conditions: device.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()),
        is_mig,
        places_itself,
    };
    let placement = match shared_binding {
        Some(shared) if **shared == binding => Arc::clone(shared_placement.get_or_insert_with(|| {
            Arc::new(Placement {
                common: Arc::clone(common_list),
                binding: Arc::clone(shared),
            })
        })),
        _ => Arc::new(Placement {
            common: Arc::clone(common_list),
            binding: Arc::new(binding),
        }),
    };
    Ok(RawDevice {
        kind: tables.kinds.value(kind),
        placement,
    })
}

/// Parses `slice`; its devices come back beside the record, for the inventory to place.
pub(crate) fn parse_slice(slice: &ResourceSlice, tables: &mut Tables) -> (SliceRecord, Vec<RawDevice>) {
    let mut record = SliceRecord {
        name: tables.strings.str(slice.metadata.name.as_deref().unwrap_or_default()),
        generation: slice.spec.pool.generation,
        count: slice.spec.pool.resource_slice_count,
        has_devices: slice.spec.devices.as_ref().is_some_and(|d| !d.is_empty()),
        counter_sets: Vec::new(),
        set_error: None,
        device_error: None,
        devices: Vec::new(),
    };
    'sets: for set in slice.spec.shared_counters.iter().flatten() {
        let mut counters = Vec::new();
        for (name, counter) in &set.counters {
            match parse(&counter.value, &format!("counter {}/{name}", set.name)) {
                Ok(value) => counters.push((tables.strings.str(name), value)),
                Err(e) => {
                    record.set_error = Some(e);
                    break 'sets;
                }
            }
        }
        let counters = tables.counters.value(CounterList(counters.into()));
        let name = tables.strings.str(&set.name);
        record.counter_sets.push(CounterSetDef { name, counters });
    }
    let devices: Vec<&Device> = slice.spec.devices.iter().flatten().collect();
    // Groups: devices consuming the same first counter set (a card), or all devices without one.
    let mut groups: BTreeMap<&str, Vec<&Device>> = BTreeMap::new();
    for device in &devices {
        let set = device
            .consumes_counters
            .as_ref()
            .and_then(|c| c.first())
            .map_or("", |c| c.counter_set.as_str());
        groups.entry(set).or_default().push(device);
    }
    type Common<'s> = (
        BTreeMap<&'s str, &'s DeviceAttribute>,
        Arc<AttrList>,
        Option<Arc<Placement>>,
    );
    let mut commons: BTreeMap<&str, Common<'_>> = BTreeMap::new();
    for (set, members) in &groups {
        let common = common_attributes(members);
        let list = attr_list(common.iter().map(|(n, v)| (*n, *v)).collect(), tables);
        commons.insert(set, (common, list, None));
    }
    let shared_binding = slice_binding(slice).map(Arc::new);
    let mut parsed = Vec::with_capacity(devices.len());
    for (position, device) in devices.iter().enumerate() {
        let set = device
            .consumes_counters
            .as_ref()
            .and_then(|c| c.first())
            .map_or("", |c| c.counter_set.as_str());
        let (common, list, placement) = commons.get_mut(set).expect("grouped above");
        match device_of(slice, &shared_binding, device, common, list, placement, tables) {
            Ok(raw) => parsed.push(raw),
            Err(e) => {
                record.device_error = Some((position, format!("device {}: {e}", device.name)));
                break;
            }
        }
    }
    (record, parsed)
}

#[cfg(test)]
#[path = "slice_record_tests.rs"]
mod tests;
