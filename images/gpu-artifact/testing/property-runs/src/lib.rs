//! How the property tests of the parsers of outside input run (issue 17, item 7): every parser that
//! reads what the node, the kubelet, the API server or a user hands it (opaque configs, uevents,
//! sysfs attributes, pci.ids, os-release, DMI, the checkpoint, mig-minors, kubelet requests, claim
//! resolution, hook binding contexts, CEL selectors) has a property: no panic, an error that names
//! what was wrong, nothing already prepared lost.
//!
//! - `PROPERTY_CASES` sets the number of cases (default [`SHORT_RUN`]: what `make test` runs);
//!   `make fuzz` sets 1,000,000.
//! - A failing input is shrunk, then kept in `<test file>.regressions` beside the test and run
//!   first by every later run (commit the file: it is the regression case).
//! - Each run prints `property <name>: <n> cases passed ... in <t> s` (what `make fuzz` reports).
//!
//! Test-only; never a dependency of a shipped binary.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub use proptest;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

/// Cases per property when `PROPERTY_CASES` is unset.
pub const SHORT_RUN: u32 = 256;

/// The number of cases this run asks for.
pub fn cases() -> u32 {
    std::env::var("PROPERTY_CASES")
        .ok()
        .and_then(|text| text.trim().replace('_', "").parse().ok())
        .unwrap_or(SHORT_RUN)
}

/// Runs `property` over `inputs`; panics with the shrunk failing input (and keeps it as a seed).
/// `source_file` is the caller's `file!()`: the seeds live beside it.
pub fn check<S>(
    name: &str,
    source_file: &'static str,
    inputs: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        cases: cases(),
        source_file: Some(source_file),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        // A million cases must not stop at proptest's default of 1,024 rejected inputs.
        max_global_rejects: u32::MAX,
        ..Config::default()
    };
    let runs = AtomicU64::new(0);
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&inputs, |value| {
        runs.fetch_add(1, Ordering::Relaxed);
        property(value)
    });
    match outcome {
        Ok(()) => println!(
            "property {name}: {} cases passed ({} inputs run, seeds included) in {:.1} s",
            runner.config().cases,
            runs.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64()
        ),
        Err(error) => panic!("property {name} failed: {error}"),
    }
}

/// Fails the case with `message` unless `holds`.
pub fn ensure(holds: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if holds {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}
