//! Crash-safe file replacement: a reader sees the old content or the new one,
//! never a mix, and the new one survives a power cut once the call returns.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::error::PrepareError;

/// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
/// over `path` and fsyncs the directory (which makes the rename durable).
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), PrepareError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(PrepareError::io("create directory", dir))?;
    let mut temp_name = path.file_name().unwrap_or_default().to_os_string();
    temp_name.push(".tmp");
    let temp = dir.join(temp_name);
    let write = || -> io::Result<()> {
        let mut file = File::create(&temp)?;
        file.write_all(contents)?;
        file.sync_all()
    };
    write().map_err(PrepareError::io("write", &temp))?;
    fs::rename(&temp, path).map_err(PrepareError::io("rename into place", path))?;
    sync_dir(dir)
}

/// Removes `path` durably; a missing file is already removed.
pub(crate) fn remove_durably(path: &Path) -> Result<(), PrepareError> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(PrepareError::io("remove", path)(e)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), PrepareError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(PrepareError::io("sync directory", dir))
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
}
