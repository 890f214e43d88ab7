//! The ledger survives a power cut once `save` returns: the new file is on disk (fsync) before it
//! replaces the old one (rename), and the rename is on disk (fsync of the directory) before `save`
//! returns. Seen on the system calls the process makes, through strace (a Debian package
//! `tools/install/deps.sh` installs).

use std::path::Path;
use std::process::Command;

use gpu_health::HealthLedger;

/// Set in the child strace runs: the ledger path to save to.
const CHILD_ENV: &str = "GPU_HEALTH_TEST_LEDGER_SAVE";
const TEST: &str = "a_save_syncs_the_file_before_the_rename_and_the_directory_after_it";

/// One traced call: its name and what it names (the path behind an fd, or rename's two paths).
#[derive(Debug, PartialEq)]
enum Call {
    Sync(String),
    Rename(String, String),
}

/// The fsync, fdatasync and rename* calls of an `strace -f -y` output, in order.
fn calls(trace: &str) -> Vec<Call> {
    let quoted = |text: &str| -> Vec<String> { text.split('"').skip(1).step_by(2).map(str::to_owned).collect() };
    trace
        .lines()
        .filter(|line| line.trim_end().ends_with("= 0"))
        .filter_map(|line| {
            let call = line.split_once(' ').map_or(line, |(_, rest)| rest).trim_start();
            if call.starts_with("fsync(") || call.starts_with("fdatasync(") {
                let path = call.split_once('<')?.1.split_once('>')?.0;
                Some(Call::Sync(path.to_owned()))
            } else if call.starts_with("rename") {
                let paths = quoted(call);
                Some(Call::Rename(paths.first()?.clone(), paths.get(1)?.clone()))
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn a_save_syncs_the_file_before_the_rename_and_the_directory_after_it() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        HealthLedger::default().save(Path::new(&path)).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let ledger = dir_path.join("health.json");
    std::fs::write(&ledger, b"{}").unwrap();
    let trace = dir_path.join("trace");
    let traced = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2",
            "-o",
        ])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--test-threads=1"])
        .env(CHILD_ENV, &ledger)
        .output()
        .expect("strace runs (tools/install/deps.sh installs it)");
    assert!(traced.status.success(), "{}", String::from_utf8_lossy(&traced.stderr));
    let calls = calls(&std::fs::read_to_string(&trace).unwrap());

    let name = ledger.file_name().unwrap().to_string_lossy();
    let temporary = ledger.with_file_name(format!(".{name}.tmp")).display().to_string();
    let renamed = calls
        .iter()
        .position(|call| *call == Call::Rename(temporary.clone(), ledger.display().to_string()))
        .unwrap_or_else(|| panic!("no rename of {temporary} into place: {calls:?}"));
    let before = calls.get(..renamed).unwrap_or_default();
    let after = calls.get(renamed + 1..).unwrap_or_default();
    assert!(
        before.contains(&Call::Sync(temporary.clone())),
        "the new file is synced before the rename: {calls:?}"
    );
    assert!(
        after.contains(&Call::Sync(dir_path.display().to_string())),
        "the directory is synced after the rename: {calls:?}"
    );
}
