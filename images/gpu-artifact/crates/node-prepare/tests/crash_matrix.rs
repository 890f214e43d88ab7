//! The crash matrix: every fault point of prepare, its rollback, unprepare and reconciliation
//! ([`node_prepare::fault_points`], generated from the step lists, so a new step is in the matrix
//! without anyone adding it), for each mode: whole card, MIG device, MPS share (its daemon the
//! handler's child, or a static Pod of the kubelet), TimeSlicing share, VFIO passthrough.
//!
//! Each case runs the operation in a child process (this test binary again, running the same
//! `NodePreparer` the handler runs) that stops at the point; the parent sends it a real SIGKILL.
//! Then, as the handler does after a restart, a new preparer reconciles, the kubelet's retry
//! arrives (prepare again, or unprepare again), and the node must be exactly right: the claim
//! prepared once, then unprepared with nothing left behind (no MIG instance or MIG mode of ours, no
//! vfio-pci binding, CDI spec, QEMU payload, MPS daemon, time-slice setting or checkpoint entry).
//! The end-to-end suite kills the real gpu-handler at a subset of these points
//! (`e2e/tests/node_crash.rs`).

#[path = "crash_matrix/cases.rs"]
mod cases;
#[path = "crash_matrix/end_state.rs"]
mod end_state;
mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;

use cases::{CHILD_ENV, Mode, Outcome, run_case, run_child_if_asked};

/// A case's result per point and mode.
type Table = BTreeMap<String, BTreeMap<Mode, Outcome>>;

#[test]
fn a_kill_at_every_point_of_every_mode_leaves_the_node_exactly_right() {
    if run_child_if_asked() {
        return;
    }
    assert!(std::env::var(CHILD_ENV).is_err());
    let points = node_prepare::fault_points();
    let table: Mutex<Table> = Mutex::new(BTreeMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for mode in Mode::ALL {
            let (points, table, failures) = (&points, &table, &failures);
            scope.spawn(move || {
                for point in points {
                    let outcome = match std::panic::catch_unwind(|| run_case(mode, point)) {
                        Ok(outcome) => outcome,
                        Err(panic) => {
                            let message = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            failures.lock().unwrap().push(format!("{mode:?} at {point}: {message}"));
                            Outcome::Failed
                        }
                    };
                    table
                        .lock()
                        .unwrap()
                        .entry(point.clone())
                        .or_default()
                        .insert(mode, outcome);
                }
            });
        }
    });
    let table = table.into_inner().unwrap();
    print_table(&points, &table);
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for point in &points {
        let reached = table[point]
            .values()
            .any(|outcome| *outcome == Outcome::KilledAndRecovered);
        assert!(
            reached,
            "no mode reaches fault point {point}: the matrix does not exercise it"
        );
    }
    // Only the points inside a step belong to one mode; every mode passes all the others.
    for point in points.iter().filter(|p| !p.starts_with("prepare/inside/")) {
        for mode in Mode::ALL {
            assert_eq!(table[point][&mode], Outcome::KilledAndRecovered, "{mode:?} at {point}");
        }
    }
}

fn print_table(points: &[String], table: &Table) {
    let mut text = String::from("| fault point |");
    for mode in Mode::ALL {
        text.push_str(&format!(" {mode:?} |"));
    }
    text.push_str(&format!("\n|{}\n", " --- |".repeat(Mode::ALL.len() + 1)));
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    for point in points {
        text.push_str(&format!("| `{point}` |"));
        for mode in Mode::ALL {
            let outcome = table[point][&mode];
            *counts.entry(outcome).or_default() += 1;
            text.push_str(&format!(" {} |", outcome.cell()));
        }
        text.push('\n');
    }
    text.push_str(&format!("\n{counts:?}\n"));
    println!("{text}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("crash-matrix.md");
    let _ = std::fs::write(path, text);
}
