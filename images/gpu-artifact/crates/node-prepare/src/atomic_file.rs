//! Crash-safe file replacement for the pipeline's files (see `durable_file`), failing with
//! [`PrepareError::Io`] naming the step and the path.

use std::path::Path;

use durable_file::DurableFileError;

use crate::error::PrepareError;

/// Replaces `path` with `contents`: a reader sees the old content or the new one, and the new one
/// (the rename included) survives a power cut once the call returns.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), PrepareError> {
    durable_file::write_atomically(path, contents).map_err(into_prepare_error)
}

/// Removes `path` durably; a missing file is already removed.
pub(crate) fn remove_durably(path: &Path) -> Result<(), PrepareError> {
    durable_file::remove_durably(path).map_err(into_prepare_error)
}

fn into_prepare_error(error: DurableFileError) -> PrepareError {
    PrepareError::Io {
        action: error.action,
        path: error.path,
        source: error.source,
    }
}
