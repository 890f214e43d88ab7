//! The `GPUClass` custom resource (`gpu.deckhouse.io/v1alpha1`, cluster-scoped): the one object an
//! admin keeps for years. It says which GPUs a class means and how they are shared; gpu-controller
//! renders it into a DRA DeviceClass of the same name. What can be checked without the cluster is
//! checked by the API server (`x-kubernetes-validations` below); the rest by the controller, which
//! reports it in `status.conditions[type=Ready]`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::opaque_config::{SharingStrategy, TimeSliceInterval};

/// Which GPUs the class means and how they are shared.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gpu.deckhouse.io",
    version = "v1alpha1",
    kind = "GPUClass",
    plural = "gpuclasses",
    shortname = "gpuc",
    label("heritage", "deckhouse"),
    label("module", "gpu"),
    status = "GPUClassStatus",
    doc = "GPUClass says which GPUs a class of devices means (vendor, whole cards or MIG partitions, memory, compute capability, PhysicalGPU labels) and how they are shared (exclusively, by time slicing or MPS, or handed to virtual machines through VFIO). gpu-controller renders it into a DRA DeviceClass of the same name, requested as the extended resource gpu.deckhouse.io/<name> or by name in ResourceClaims.",
    validation = Rule::new("self.metadata.name.size() <= 63 || has(self.spec.extendedResourceName)").message("a GPUClass name longer than 63 characters cannot be an extended resource name: set spec.extendedResourceName"),
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.deviceType"}"#,
    printcolumn = r#"{"name":"Profile","type":"string","priority":1,"jsonPath":".spec.nvidia.mig.profile"}"#,
    printcolumn = r#"{"name":"Sharing","type":"string","jsonPath":".spec.sharing.strategy"}"#,
    printcolumn = r#"{"name":"VFIO","type":"boolean","priority":1,"jsonPath":".spec.vfio"}"#,
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".status.generated.extendedResourceName"}"#,
    printcolumn = r#"{"name":"Devices","type":"integer","jsonPath":".status.devices.published"}"#,
    printcolumn = r#"{"name":"Allocated","type":"integer","jsonPath":".status.devices.allocated"}"#,
    printcolumn = r#"{"name":"Free","type":"integer","jsonPath":".status.devices.free"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.deviceType == 'MIG' ? (has(self.nvidia) && has(self.nvidia.mig)) : !(has(self.nvidia) && has(self.nvidia.mig))").message("nvidia.mig.profile is required with deviceType MIG and allowed only with it"))]
#[x_kube(validation = Rule::new("!has(self.sharing) || self.deviceType == 'Physical'").message("sharing applies to deviceType Physical only: a MIG partition is never shared"))]
#[x_kube(validation = Rule::new("!(has(self.vfio) && self.vfio) || (self.deviceType == 'Physical' && (!has(self.sharing) || self.sharing.strategy == 'Exclusive'))").message("vfio needs deviceType Physical and sharing Exclusive: a virtual machine gets a whole card to itself"))]
#[x_kube(validation = Rule::new("!has(self.nvidia) || !has(self.vendor) || self.vendor == 'Nvidia'").message("nvidia settings need vendor Nvidia"))]
pub struct GPUClassSpec {
    /// The GPU vendor; every vendor when absent (only NVIDIA GPUs are published today).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<GpuVendor>,
    /// `Physical`: whole cards. `MIG`: MIG partitions of the profile in `nvidia.mig.profile`, made on
    /// the node when a claim is prepared.
    pub device_type: ClassDeviceType,
    /// Minimums every device of the class meets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Requirements>,
    /// NVIDIA-specific settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvidiaClassSettings>,
    /// How whole cards of the class are shared; Exclusive when absent. TimeSlicing and MPS use the
    /// shared offers of nodes labelled `gpu.deckhouse.io/allow-timeslicing=true` or
    /// `gpu.deckhouse.io/allow-mps=true`; a claim asks for its part with the capacity
    /// `gpu.deckhouse.io/sharePercent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<ClassSharing>,
    /// Devices of the class are handed to virtual machines through vfio-pci: the DeviceClass carries
    /// the opaque `VfioDeviceConfig`, and only whole cards, exclusive, on bare-metal nodes are
    /// selected. The class the virtualization module's VMs name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vfio: Option<bool>,
    /// Only cards whose PhysicalGPU carries these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<PhysicalGpuSelector>,
    /// Only these PhysicalGPUs (by name), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[schemars(extend("items" = {"type": "string", "maxLength": 253, "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}))]
    pub names: Option<Vec<String>>,
    /// The extended resource Pods ask for (`resources.limits`), `gpu.deckhouse.io/<name>` when
    /// absent. One name belongs to one class: a second class asking for it gets its DeviceClass
    /// without the name, and its Ready condition says who holds it (ExtendedResourceConflict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
    ))]
    #[x_kube(validation = Rule::new("!self.contains('kubernetes.io/') && !self.startsWith('requests.')").message("must be an extended resource name outside kubernetes.io"))]
    pub extended_resource_name: Option<String>,
    /// `BestFit` (default): Pods of this class wait behind the scheduling gate
    /// `gpu.deckhouse.io/allocation` until gpu-dra-controller allocates them best fit (fewest MIG
    /// slices, then least memory). `FirstFit`: no gate; the kube-scheduler allocates its first fit.
    /// Rendered into the DeviceClass annotation `gpu.deckhouse.io/allocation-policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_policy: Option<AllocationPolicy>,
}

// A GPU vendor. (No type-level doc: the schema keeps the field's own description.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GpuVendor {
    /// NVIDIA.
    Nvidia,
    /// AMD (no backend yet).
    Amd,
    /// Intel (no backend yet).
    Intel,
}

impl GpuVendor {
    /// The value of the devices' `gpu.deckhouse.io/vendor` attribute and PhysicalGPU label.
    pub fn attribute_value(self) -> &'static str {
        match self {
            GpuVendor::Nvidia => "nvidia",
            GpuVendor::Amd => "amd",
            GpuVendor::Intel => "intel",
        }
    }
}

// Whole cards or MIG partitions. (No type-level doc: the schema keeps the field's description.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ClassDeviceType {
    /// Whole cards.
    #[default]
    Physical,
    /// MIG partitions.
    #[serde(rename = "MIG")]
    Mig,
}

impl ClassDeviceType {
    /// The value of the devices' `gpu.deckhouse.io/deviceType` attribute.
    pub fn attribute_value(self) -> &'static str {
        match self {
            ClassDeviceType::Physical => "Physical",
            ClassDeviceType::Mig => "MIG",
        }
    }
}

/// Minimums of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// At least this much memory per device, e.g. `40Gi`. MIG profiles are smaller than their
    /// names say (an A30's `2g.12gb` has 11968Mi, less than 12Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))").message("must be a positive quantity such as 24Gi"))]
    pub min_memory: Option<Quantity>,
    /// At least this CUDA compute capability, `<major>.<minor>`, e.g. `8.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{1,3}\.[0-9]{1,3}$"))]
    pub min_compute_capability: Option<String>,
}

/// NVIDIA-specific settings of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NvidiaClassSettings {
    /// MIG settings; required with deviceType MIG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigClassSettings>,
}

/// Which MIG partitions the class means.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MigClassSettings {
    /// The MIG profile as NVIDIA names it, e.g. `1g.6gb`, `2g.12gb`, `1g.10gb+me`.
    #[schemars(regex(pattern = r"^[0-9]+g\.[0-9]+gb(\+[a-z]+)*$"))]
    pub profile: String,
}

/// How whole cards are shared.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.timeSlicing) || self.strategy == 'TimeSlicing'").message("timeSlicing is allowed only with strategy TimeSlicing"))]
#[x_kube(validation = Rule::new("!has(self.mps) || self.strategy == 'MPS'").message("mps is allowed only with strategy MPS"))]
pub struct ClassSharing {
    /// `Exclusive`: one claim per card. `TimeSlicing`: claims take turns on the card. `MPS`: CUDA
    /// Multi-Process Service, each claim limited to its `sharePercent` of the card.
    pub strategy: SharingStrategy,
    /// Time-slicing settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_slicing: Option<ClassTimeSlicing>,
    /// MPS settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<ClassMps>,
}

/// Time-slicing settings of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClassTimeSlicing {
    /// The time-slice length: Default, Short, Medium or Long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<TimeSliceInterval>,
}

/// MPS settings of a class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassMps {
    /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` of every share, 1..100; each share's own sharePercent
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub default_active_thread_percentage: Option<u8>,
}

/// PhysicalGPU labels a card must carry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalGpuSelector {
    /// Label key and value pairs, all of which a card's PhysicalGPU must carry. Every key must be
    /// a label some PhysicalGPU has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

// Who allocates Pods of the class. (No type-level doc: the schema keeps the field's description.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AllocationPolicy {
    /// gpu-dra-controller, best fit, behind the scheduling gate.
    #[default]
    BestFit,
    /// The kube-scheduler, its first fit, without the gate.
    FirstFit,
}

impl AllocationPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationPolicy::BestFit => "BestFit",
            AllocationPolicy::FirstFit => "FirstFit",
        }
    }
}

/// What the controller made of the class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GPUClassStatus {
    /// `Ready`: True when the DeviceClass is applied and devices of the class are published (reason
    /// ExtendedResourceConflict when another class holds its extended resource name); False with the
    /// reason (Invalid, DeviceClassNotManaged, ApplyFailed, LabelNotFound, NoMatchingDevices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// What was rendered; absent while nothing is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<GeneratedObjects>,
    /// Devices of the class now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<ClassDeviceCounts>,
}

/// The DeviceClass and extended resource rendered from the class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedObjects {
    /// The DeviceClass, of the same name as the GPUClass.
    pub device_class_name: String,
    /// The extended resource Pods ask for; absent when the API server does not keep it (feature
    /// gate DRAExtendedResource off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_name: Option<String>,
}

/// Device counts of a class, from the published ResourceSlices and the allocated claims.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClassDeviceCounts {
    /// Devices of the class the nodes publish now.
    pub published: i64,
    /// Devices allocated to claims through this class (a card handed to a virtual machine counts
    /// even while its node stops publishing it).
    pub allocated: i64,
    /// Published devices of the class a new claim could get now: not held by a claim (or a shared
    /// one with room left), and their card not taken by another allocation.
    pub free: i64,
}
