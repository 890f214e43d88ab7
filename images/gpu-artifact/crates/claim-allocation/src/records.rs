//! What the controller keeps of each watched object: only what its decisions read, so 10,000
//! claims and the Pods of our driver fit in a few MiB. The full objects are dropped once these
//! are taken from them (the engine keeps what it needs of slices, classes and allocations).

use std::collections::BTreeMap;

use dra_allocator::GPU_DRIVER;
use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate};
use k8s_openapi::jiff::Timestamp;

use crate::selection::SCHEDULING_GATE;

/// The DeviceClass annotation by which a class opts out of best-fit allocation: Pods whose
/// claims use only such classes are not gated and the kube-scheduler allocates them (value
/// `"false"`; anything else, or no annotation, keeps best fit). A GPUClass renders it.
pub const BEST_FIT_ANNOTATION: &str = "gpu.deckhouse.io/best-fit-allocation";

/// The label the admission step puts on every Pod whose claims use a class of our driver: the
/// controller watches only Pods carrying it. Value `gated` when the Pod got the scheduling gate,
/// `scheduler` when its classes opted out.
pub const POD_LABEL: &str = "gpu.deckhouse.io/allocation";

pub struct ClassRecord {
    pub ours: bool,
    pub best_fit: bool,
    pub extended_resource: Option<String>,
}

/// A class is ours when it selects our driver or configures it.
pub fn is_our_class(class: &DeviceClass) -> bool {
    let selects = class.spec.selectors.iter().flatten().any(|s| {
        s.cel
            .as_ref()
            .is_some_and(|cel| cel.expression.contains(&format!("\"{GPU_DRIVER}\"")))
    });
    let configures = class
        .spec
        .config
        .iter()
        .flatten()
        .any(|c| c.opaque.as_ref().is_some_and(|o| o.driver == GPU_DRIVER));
    selects || configures
}

impl ClassRecord {
    pub fn of(class: &DeviceClass) -> ClassRecord {
        let opted_out = class
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(BEST_FIT_ANNOTATION))
            .is_some_and(|v| v == "false");
        ClassRecord {
            ours: is_our_class(class),
            best_fit: !opted_out,
            extended_resource: class.spec.extended_resource_name.clone(),
        }
    }
}

/// The classes a claim spec's requests name.
pub fn class_names(spec: &ResourceClaimSpec) -> Vec<String> {
    let mut names = vec![];
    for request in spec.devices.iter().flat_map(|d| d.requests.iter().flatten()) {
        if let Some(exact) = &request.exactly {
            names.push(exact.device_class_name.clone());
        }
        for sub in request.first_available.iter().flatten() {
            names.push(sub.device_class_name.clone());
        }
    }
    names
}

pub struct ClaimRecord {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    pub created: Option<Timestamp>,
    pub classes: Vec<String>,
    /// The spec, kept while the claim waits for an allocation (the controller may allocate it).
    pub spec: Option<ResourceClaimSpec>,
    pub allocated: bool,
    /// Our driver's devices it holds, `pool/device`.
    pub devices: Vec<String>,
    pub reserved: bool,
    pub owned_by_pod: bool,
    pub deleting: bool,
}

impl ClaimRecord {
    pub fn of(claim: &ResourceClaim) -> ClaimRecord {
        let status = claim.status.as_ref();
        let allocation = status.and_then(|s| s.allocation.as_ref());
        let devices = allocation
            .iter()
            .flat_map(|a| a.devices.iter())
            .flat_map(|d| d.results.iter().flatten())
            .filter(|r| r.driver == GPU_DRIVER)
            .map(|r| format!("{}/{}", r.pool, r.device))
            .collect();
        ClaimRecord {
            uid: claim.metadata.uid.clone().unwrap_or_default(),
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            name: claim.metadata.name.clone().unwrap_or_default(),
            resource_version: claim.metadata.resource_version.clone().unwrap_or_default(),
            created: claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
            classes: class_names(&claim.spec),
            spec: allocation.is_none().then(|| claim.spec.clone()),
            allocated: allocation.is_some(),
            devices,
            reserved: status.and_then(|s| s.reserved_for.as_ref()).is_some_and(|r| !r.is_empty()),
            owned_by_pod: claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Pod"),
            deleting: claim.metadata.deletion_timestamp.is_some(),
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The claim as the engine reads it (its spec; never allocated).
    pub fn to_claim(&self) -> Option<ResourceClaim> {
        let mut claim = ResourceClaim {
            spec: self.spec.clone()?,
            ..ResourceClaim::default()
        };
        claim.metadata.name = Some(self.name.clone());
        claim.metadata.namespace = Some(self.namespace.clone());
        claim.metadata.uid = Some(self.uid.clone());
        Some(claim)
    }
}

/// A claim of a Pod: by name, or made from a template (its name known once created).
pub struct PodClaim {
    pub claim: Option<String>,
    pub template: Option<String>,
}

pub struct PodRecord {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    pub created: Option<Timestamp>,
    pub gated: bool,
    pub claims: Vec<PodClaim>,
    /// Resource requests of every container by name (extended resources among them).
    pub requests: BTreeMap<String, i64>,
    pub node_name: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub required_affinity: Option<NodeSelector>,
    /// `reason: message` of PodScheduled=False, when the scheduler gave up on it.
    pub unschedulable: Option<String>,
    pub deleting: bool,
}

fn quantity_count(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    dra_cel::Quantity::parse(&q.0)
        .ok()
        .and_then(|q| q.to_decimal_string().parse::<f64>().ok())
        .map_or(0, |v| v.ceil() as i64)
}

impl PodRecord {
    pub fn of(pod: &Pod) -> PodRecord {
        let spec = pod.spec.as_ref();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        let claims = spec
            .iter()
            .flat_map(|s| s.resource_claims.iter().flatten())
            .map(|c| match &c.resource_claim_name {
                Some(name) => PodClaim {
                    claim: Some(name.clone()),
                    template: None,
                },
                None => PodClaim {
                    claim: statuses
                        .iter()
                        .find(|s| s.name == c.name)
                        .and_then(|s| s.resource_claim_name.clone()),
                    template: c.resource_claim_template_name.clone(),
                },
            })
            .collect();
        let mut requests = BTreeMap::new();
        let containers = spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(s.containers.iter()));
        for container in containers {
            for (name, q) in container.resources.iter().flat_map(|r| r.requests.iter().flatten()) {
                *requests.entry(name.clone()).or_default() += quantity_count(q);
            }
        }
        let unschedulable = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False"))
            .map(|c| {
                format!(
                    "{}: {}",
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default()
                )
            });
        PodRecord {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            resource_version: pod.metadata.resource_version.clone().unwrap_or_default(),
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            gated: spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| g.iter().any(|g| g.name == SCHEDULING_GATE)),
            claims,
            requests,
            node_name: spec.and_then(|s| s.node_name.clone()),
            node_selector: spec.and_then(|s| s.node_selector.clone()).unwrap_or_default(),
            required_affinity: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| n.required_during_scheduling_ignored_during_execution.clone()),
            unschedulable,
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

pub struct TemplateRecord {
    pub classes: Vec<String>,
}

impl TemplateRecord {
    pub fn of(template: &ResourceClaimTemplate) -> TemplateRecord {
        TemplateRecord {
            classes: class_names(&template.spec.spec),
        }
    }
}
