//! The durable writes a prepare and an unprepare cannot avoid, done by hand in the handler's own
//! directories, so the plugin's latency can be read as a multiple of the disk's floor.
//!
//! Counted from crates/node-prepare: a prepare makes three atomic writes (checkpoint with the
//! claim `PrepareStarted`, the claim's CDI spec, checkpoint with `PrepareCompleted`); an
//! unprepare makes one durable removal (the CDI spec, then an fsync of its directory) and one
//! atomic write (the checkpoint without the claim). An atomic write is: write a temporary file,
//! fsync it, rename it over the target, fsync the directory. So a prepare pays 6 fsyncs, an
//! unprepare 3. MIG work goes to the mock NVML and has no durable write of ours.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Atomic writes per prepare, and per unprepare (plus one durable removal).
pub const PREPARE_ATOMIC_WRITES: usize = 3;
pub const UNPREPARE_ATOMIC_WRITES: usize = 1;
pub const UNPREPARE_DURABLE_REMOVALS: usize = 1;

/// Files named so the handler never mistakes them for its own.
pub struct FsyncFloor {
    checkpoint: PathBuf,
    cdi_spec: PathBuf,
    checkpoint_bytes: Vec<u8>,
    cdi_bytes: Vec<u8>,
}

impl FsyncFloor {
    /// Writes into `plugin_dir` (beside the real checkpoint) and `cdi_dir` (beside the real specs),
    /// with contents the sizes of a real checkpoint and CDI spec.
    pub fn new(plugin_dir: &Path, cdi_dir: &Path, checkpoint_size: usize, cdi_size: usize) -> Self {
        Self {
            checkpoint: plugin_dir.join("bench-floor-checkpoint.json"),
            cdi_spec: cdi_dir.join("bench-floor-cdi.json"),
            checkpoint_bytes: vec![b'c'; checkpoint_size],
            cdi_bytes: vec![b's'; cdi_size],
        }
    }

    /// The durable writes of one prepare, timed.
    pub fn prepare(&self) -> Duration {
        let start = Instant::now();
        write_atomically(&self.checkpoint, &self.checkpoint_bytes);
        write_atomically(&self.cdi_spec, &self.cdi_bytes);
        write_atomically(&self.checkpoint, &self.checkpoint_bytes);
        start.elapsed()
    }

    /// The durable writes of one unprepare, timed (the CDI spec the prepare floor left is removed).
    pub fn unprepare(&self) -> Duration {
        let start = Instant::now();
        fs::remove_file(&self.cdi_spec).unwrap();
        sync_dir(&self.cdi_spec);
        write_atomically(&self.checkpoint, &self.checkpoint_bytes);
        start.elapsed()
    }

    /// Removes what the floor wrote.
    pub fn clean_up(&self) {
        for path in [&self.checkpoint, &self.cdi_spec] {
            let _ = fs::remove_file(path);
        }
    }
}

fn write_atomically(path: &Path, contents: &[u8]) {
    let temp = path.with_extension("json.tmp");
    let mut file = File::create(&temp).unwrap();
    file.write_all(contents).unwrap();
    file.sync_all().unwrap();
    fs::rename(&temp, path).unwrap();
    sync_dir(path);
}

fn sync_dir(file: &Path) {
    File::open(file.parent().unwrap()).unwrap().sync_all().unwrap();
}
