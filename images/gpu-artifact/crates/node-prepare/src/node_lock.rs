//! The node lock: one prepare, unprepare or reconcile at a time on a node,
//! across threads and processes (an old and a new handler during a rolling
//! update). An exclusive `flock` on a file in the plugin directory; the kernel
//! releases it when the holder exits, even by a crash.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::PrepareError;

/// How often a waiting caller retries: short against the ~1 s a GPU instance
/// destroy takes, long enough not to spin.
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct NodeLockGuard {
    _file: File,
}

/// Takes the lock at `path`, waiting at most `timeout` for its holder.
pub(crate) fn acquire(path: &Path, timeout: Duration) -> Result<NodeLockGuard, PrepareError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(PrepareError::io("create directory", dir))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(PrepareError::io("open node lock", path))?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(NodeLockGuard { _file: file }),
            Err(TryLockError::WouldBlock) if started.elapsed() < timeout => thread::sleep(RETRY_INTERVAL),
            Err(TryLockError::WouldBlock) => {
                return Err(PrepareError::LockTimeout {
                    path: PathBuf::from(path),
                    waited: timeout,
                });
            }
            Err(TryLockError::Error(e)) => return Err(PrepareError::io("lock", path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_waited_for_then_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin/prepare.lock");
        let held = acquire(&path, Duration::ZERO).unwrap();
        let started = Instant::now();
        let refused = acquire(&path, Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(refused.to_string().contains(&path.display().to_string()), "{refused}");
        assert!(matches!(refused, PrepareError::LockTimeout { .. }));
        drop(held);
        acquire(&path, Duration::ZERO).expect("released with its guard");
    }

    #[test]
    fn a_waiter_gets_the_lock_once_the_holder_releases_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prepare.lock");
        let held = acquire(&path, Duration::ZERO).unwrap();
        let releaser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        acquire(&path, Duration::from_secs(5)).expect("taken after release");
        releaser.join().unwrap();
    }
}
