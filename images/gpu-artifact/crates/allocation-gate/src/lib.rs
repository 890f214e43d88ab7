//! Best fit for ordinary GPU Pods (issue 16 item 3): a Pod created with a claim of a class of
//! our driver gets the scheduling gate `gpu.deckhouse.io/allocation`, so that gpu-dra-controller
//! allocates its claims best fit before the scheduler binds it.
//!
//! - [`gate_classes`]: which DeviceClasses gate (ours, not opted out by the annotation
//!   `gpu.deckhouse.io/best-fit: "false"`), and the extended resources that name them;
//! - [`pod_gate`]: whether a Pod gets the gate, and the JSONPatch (pure);
//! - [`webhook`]: the HTTPS mutating admission webhook gpu-dra-controller serves, on
//!   [`webhook_server`] (deadlines and a connection limit);
//! - [`gate_lifter`]: fail open, the gate of a Pod that waits too long is lifted (gpu-controller),
//!   its wait counted by [`gate_clock`] from when our gate became the Pod's last one.

pub mod gate_classes;
pub mod gate_clock;
pub mod gate_lifter;
pub mod pod_gate;
pub mod webhook;
pub mod webhook_server;
