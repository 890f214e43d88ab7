//! Plumbing every Kubernetes-facing component of the gpu module shares: connecting to an API
//! server that may not be up yet (retry with backoff instead of a crash loop), leader election
//! through a `coordination.k8s.io` Lease, Events on the objects a component acts on, and read-only
//! reflector caches kept until shutdown.
//!
//! It never decides anything about GPUs.

mod backoff;
mod cache;
mod events;
mod leader;
mod watch_backoff;

pub use backoff::{Backoff, retry_until_ok};
pub use cache::{keep_cache, keep_cache_of};
pub use events::EventPublisher;
pub use leader::{LeaderElection, LeaseName, while_leading};
pub use watch_backoff::WatchBackoff;
