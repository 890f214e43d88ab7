//! How the backend finds NVML.

use std::path::PathBuf;

/// The library name the NVIDIA driver installs and consumers `dlopen`.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

#[derive(Debug, Clone, Default)]
pub struct NvidiaBackendConfig {
    /// Where to load NVML from; `None` lets `dlopen` search for
    /// [`DEFAULT_LIBRARY`].
    pub library_path: Option<PathBuf>,
}
