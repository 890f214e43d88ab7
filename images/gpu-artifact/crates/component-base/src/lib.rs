//! What every binary of the gpu module needs and nothing more: structured JSON logging whose
//! verbosity comes from `LOG_LEVEL`, `/healthz` + `/readyz` endpoints, a shutdown signal that
//! fires on SIGTERM/SIGINT so components can finish in-flight work before the Pod goes away, and
//! an async runtime whose size does not follow the node's.
//!
//! It must never hold business logic: a component wires these parts, it does not ask them to decide.

mod health;
mod logging;
mod malloc;
mod runtime;
mod shutdown;

pub use health::{HealthServer, Readiness, metrics_text};
pub use logging::{LogLevel, LogLevelError, init_logging};
pub use malloc::compact_malloc;
pub use runtime::{WORKER_THREADS, block_on};
pub use shutdown::{Shutdown, wait_for_termination};
