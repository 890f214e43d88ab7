//! Plumbing every Kubernetes-facing component of the gpu module shares: connecting to an API
//! server that may not be up yet (retry with backoff instead of a crash loop), leader election
//! through a `coordination.k8s.io` Lease, and Events on the objects a component acts on.
//!
//! It never decides anything about GPUs.

mod backoff;
mod events;
mod leader;
mod watch_backoff;

pub use backoff::{Backoff, retry_until_ok};
pub use events::EventPublisher;
pub use leader::LeaderElection;
pub use watch_backoff::WatchBackoff;
