//! Files replaced crash-safely, for the node's records (the prepare checkpoint, the health ledger,
//! CDI specs, device metadata): a reader sees the old content or the new, never a mix, and once a
//! call returns its change survives a power cut.
//!
//! The new content goes to a temporary file beside the target, which is fsynced and renamed over
//! the target; then the directory is fsynced, because the rename is a change of the directory and
//! an fsync of the file does not make it durable: "Calling fsync() does not necessarily ensure that
//! the entry in the directory containing the file has also reached disk. For that an explicit
//! fsync() on a file descriptor for the directory is also needed." (fsync(2), Linux man-pages).
//! A removal is made durable the same way.
//!
//! This crate must never know what the files mean.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A step of a replacement or removal that failed, with the path it failed on.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct DurableFileError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

fn failed(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DurableFileError {
    let path = path.to_owned();
    move |source| DurableFileError { action, path, source }
}

/// Replaces `path` with `contents` (creating its directory): temporary file `.<name>.tmp` beside
/// it, fsync, rename, fsync of the directory. The temporary file is hidden: readers of a directory
/// skip dot files, the kubelet's static Pod source among them (`extractFromDir` globs `[^.]*`), so
/// a file being written is never taken for one that is there.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), DurableFileError> {
    let dir = directory_of(path);
    fs::create_dir_all(dir).map_err(failed("create directory", dir))?;
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(path.file_name().unwrap_or_default());
    temporary.push(".tmp");
    let temporary = dir.join(temporary);
    let write = || -> io::Result<()> {
        let mut file = File::create(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()
    };
    write().map_err(failed("write", &temporary))?;
    fs::rename(&temporary, path).map_err(failed("rename into place", path))?;
    sync_dir(dir)
}

/// Removes `path` durably; a missing file is already removed.
pub fn remove_durably(path: &Path) -> Result<(), DurableFileError> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(directory_of(path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(failed("remove", path)(e)),
    }
}

fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

fn sync_dir(dir: &Path) -> Result<(), DurableFileError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(failed("sync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
        remove_durably(&path).unwrap();
        assert!(!path.exists());
        remove_durably(&path).unwrap();
    }

    #[test]
    fn a_failure_names_the_step_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, b"").unwrap();
        let error = write_atomically(&blocker.join("state.json"), b"x").unwrap_err();
        assert_eq!(error.action, "create directory");
        assert!(
            error
                .to_string()
                .starts_with(&format!("create directory {}", blocker.display())),
            "{error}"
        );
    }
}
