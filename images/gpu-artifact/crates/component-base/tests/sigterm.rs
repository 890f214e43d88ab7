//! A real SIGTERM delivered to the process fires the shutdown token.

use std::time::Duration;

use component_base::{Shutdown, wait_for_termination};

#[tokio::test]
async fn sigterm_triggers_shutdown() {
    let shutdown = Shutdown::new();
    let waiter = tokio::spawn(wait_for_termination(shutdown.clone()));
    // Let the handler install before the signal arrives, or the default action would kill the test.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let name = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("signal observed in time")
        .expect("task joined")
        .expect("signal handler installed");
    assert_eq!(name, "SIGTERM");
    assert!(shutdown.is_triggered());
}
