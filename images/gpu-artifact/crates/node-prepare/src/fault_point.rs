//! Test-only fault points. The crash matrix (`tests/crash_matrix.rs`) and the end-to-end suite
//! kill the handler at every point of prepare, unprepare, rollback and reconciliation to prove
//! that a restart leaves nothing behind; in production the variable is never set and every point
//! is a no-op.
//!
//! `GPU_HANDLER_FAULT_POINT` is a comma-separated list of `point` or `point=fail`:
//! - `point`: the process stops at the point. With `GPU_HANDLER_FAULT_REACHED=<file>` set, the
//!   point's name is written to that file and the calling thread holds everything it holds (the
//!   node lock, half-made devices) until someone sends the process SIGKILL, as a test harness
//!   does: a real kill of a real process at a known place. Without it the process kills itself.
//! - `point=fail`: the point returns an error instead, so the rollback that follows can be crashed
//!   in its turn.
//!
//! The points are named `<operation>/<where>/<id>`, generated from the step lists
//! ([`fault_points`]), so a new step gets its points without anyone listing them.

use std::io::Write;
use std::time::Duration;

use crate::error::PrepareError;

/// The environment variable naming the points.
pub const FAULT_POINT_ENV: &str = "GPU_HANDLER_FAULT_POINT";

/// The file a stopped point writes its name to before waiting for SIGKILL.
pub const FAULT_REACHED_ENV: &str = "GPU_HANDLER_FAULT_REACHED";

/// What a matching point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Stop,
    Fail,
}

fn action_for(list: &str, point: &str) -> Option<Action> {
    list.split(',')
        .map(str::trim)
        .find_map(|entry| match entry.split_once('=') {
            Some((name, "fail")) if name == point => Some(Action::Fail),
            None if entry == point => Some(Action::Stop),
            _ => None,
        })
}

/// Stops the process or fails when `GPU_HANDLER_FAULT_POINT` names `point`; `Ok` otherwise.
pub(crate) fn fault_point(point: &str) -> Result<(), PrepareError> {
    let Ok(list) = std::env::var(FAULT_POINT_ENV) else {
        return Ok(());
    };
    match action_for(&list, point) {
        None => Ok(()),
        Some(Action::Fail) => Err(PrepareError::Injected {
            point: point.to_owned(),
        }),
        Some(Action::Stop) => stop_here(point),
    }
}

fn stop_here(point: &str) -> ! {
    tracing::error!(point, "fault point reached: stopping for SIGKILL");
    if let Ok(path) = std::env::var(FAULT_REACHED_ENV) {
        let written = std::fs::File::create(&path).and_then(|mut file| file.write_all(point.as_bytes()));
        if written.is_ok() {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    std::process::abort()
}

/// Every fault point, in the order an operation passes them.
pub fn fault_points() -> Vec<String> {
    let mut points = Vec::new();
    for step in crate::steps::PREPARE_STEPS {
        points.push(format!("prepare/after/{}", step.id()));
    }
    points.extend(INSIDE_STEPS.iter().map(|point| point.to_string()));
    for step in crate::steps::PREPARE_STEPS.iter().rev() {
        points.push(format!("prepare/undo/{}", step.id()));
    }
    for context in [crate::teardown::UNPREPARE, crate::teardown::ROLLBACK] {
        for part in crate::teardown::TEARDOWN_PARTS {
            points.push(format!("{context}/after/{}", part.id()));
        }
        points.push(format!("{context}/after/remove-checkpoint-entry"));
    }
    for phase in crate::reconcile::RECONCILE_PHASES {
        points.push(format!("reconcile/after/{phase}"));
    }
    points
}

/// Points inside a step, between two side effects of one device.
pub(crate) const INSIDE_STEPS: [&str; 4] = [
    "prepare/inside/create-devices/mig-create-recorded",
    "prepare/inside/create-devices/mig-device-made",
    "prepare/inside/apply-sharing/mps-static-pod-written",
    "prepare/inside/bind-vfio/function-moved",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_points_to_stop_at_and_points_to_fail_at() {
        let list = "prepare/after/write-cdi-spec=fail, prepare/undo/create-devices";
        assert_eq!(action_for(list, "prepare/after/write-cdi-spec"), Some(Action::Fail));
        assert_eq!(action_for(list, "prepare/undo/create-devices"), Some(Action::Stop));
        assert_eq!(action_for(list, "prepare/after/create-devices"), None);
        assert_eq!(action_for("", "prepare/after/create-devices"), None);
    }

    #[test]
    fn every_step_has_its_points_and_no_point_is_listed_twice() {
        let points = fault_points();
        for step in crate::steps::PREPARE_STEPS {
            assert!(points.contains(&format!("prepare/after/{}", step.id())));
            assert!(points.contains(&format!("prepare/undo/{}", step.id())));
        }
        let mut unique = points.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), points.len(), "{points:?}");
    }
}
