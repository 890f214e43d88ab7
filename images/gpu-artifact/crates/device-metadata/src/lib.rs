//! KEP-5304 device metadata: what a container learns about the devices of its claims through a
//! file, without API access. KubeVirt (1.8+) reads a passed-through GPU's PCI address from
//! `resource.kubernetes.io/pciBusID` there. Kubernetes 1.36 (alpha) and 1.37 (beta) define it;
//! there is no feature gate: the driver writes the files, the container runtime mounts them through
//! CDI. The layout and format follow `k8s.io/dynamic-resource-allocation` (`api/metadata`,
//! `kubeletplugin/metadata.go`), so consumers written against it find our files:
//!
//! - the file of one request, on the host:
//!   `<plugin dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json`;
//! - in the container:
//!   `/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<podClaimName>/<request>/<driver>-metadata.json`
//!   for a claim made from a template (the claim's annotation `resource.kubernetes.io/pod-claim-name`,
//!   set from 1.36), else `.../resourceclaims/<claim>/<request>/<driver>-metadata.json`;
//! - the CDI spec `<cdi dir>/<driver>_metadata_<claim uid>_<request>.json` (cdiVersion 0.5.0, kind
//!   `<driver>/metadata`, device `<claim uid>_<request>`) bind-mounts the file read-only; its id is
//!   added to the first device of the request;
//! - the file is a JSON stream with one `DeviceMetadata` object per API version, newest first; we
//!   write `metadata.resource.k8s.io/v1alpha1`, the only one.
//!
//! It writes only below the plugin and CDI directories it is given, and never talks to the API.

mod files;

pub use files::{ClaimIdentity, DeviceMetadataWriter, MetadataDevice, POD_CLAIM_NAME_ANNOTATION};
