//! gpu-handler against the real API server, with the node agent and the mock libnvidia-ml: the
//! A30 and H100 PhysicalGPUs reach the status of `expected/*.yaml` and stay unwritten while nothing
//! changes; a MIG mode change made behind the handler's back shows in `currentState`; DriverReady
//! gates capabilities; a critical Xid turns HardwareHealthy False; without the library it is Unknown
//! and the handler recovers once the library appears.
//!
//! DriverReady is applied by the test under gpu-controller's field manager, as the controller would
//! (driver_ready.rs proves the controller; one controller per cluster would fight parallel tests).

mod handler_node;
mod support;

use std::time::Duration;

use gpu_vendor::{MigState, VendorBackend};
use handler_node::*;
use host_fixtures::NamedHost;
use kube::ResourceExt;
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use testbed::{Progress, wait_until};

async fn reaches_the_expected_status(test: &str, fixture: NamedHost, expected_file: &str) {
    let s = setup(test, fixture).await;
    s.set_driver_ready("True").await;
    let mock = s.install_mock("nvml");
    let handler = s.start_handler(&mock.library_path());
    let want = expected(expected_file);
    let node = s.node.name().to_owned();
    let status = wait_until(
        &format!("{} to equal {expected_file}", s.name),
        Duration::from_secs(30),
        || async {
            let status = normalized(serde_json::to_value(s.gpus.get(&s.name).await?.status).unwrap(), &node);
            Ok(if status == want {
                Progress::Done(status)
            } else {
                Progress::Pending(serde_yaml::to_string(&status).unwrap())
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", handler.log()));
    assert_eq!(status, want);

    // Several NVML re-reads later, nothing has been written: the object did not change and the
    // handler sent no write request (its own count, logged after every pass). The pass that wrote
    // the status logs its count (of the handler's life) once its writes are answered, so the API
    // server can show the status before that line exists (a loaded run saw none yet): the line is
    // waited for.
    let written = wait_until(
        "the writing pass's count in the log",
        Duration::from_secs(10),
        || async {
            Ok(match write_requests(&handler) {
                Some(count) if count > 0 => Progress::Done(count),
                other => Progress::Pending(format!("last count {other:?}")),
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", handler.log()));
    let before = (s.gpus.get(&s.name).await.unwrap().resource_version(), Some(written));
    assert_eq!(
        before.1,
        Some(1),
        "one apply carried the whole status:\n{}",
        handler.log()
    );
    let passes = handler.log().matches("NVML re-read interval").count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = (
        s.gpus.get(&s.name).await.unwrap().resource_version(),
        write_requests(&handler),
    );
    assert!(
        handler.log().matches("NVML re-read interval").count() >= passes + 2,
        "the handler re-read NVML meanwhile:\n{}",
        handler.log()
    );
    assert_eq!(before, after, "no write while nothing changed:\n{}", handler.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a30_reaches_the_expected_status() {
    reaches_the_expected_status("handler-a30", NamedHost::A30Pcie, "a30-status.yaml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h100_pcie_reaches_the_expected_status() {
    reaches_the_expected_status("handler-h100", NamedHost::H100Pcie, "h100-pcie-status.yaml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_mode_change_shows_and_driver_ready_gates_what_the_handler_writes() {
    let s = setup("handler-mig", NamedHost::A30Pcie).await;
    s.set_driver_ready("True").await;
    let mock = s.install_mock("nvml");
    let handler = s.start_handler(&mock.library_path());
    s.wait_status("MIG Disabled", |st| {
        st["currentState"]["nvidia"]["mig"]["mode"] == "Disabled"
    })
    .await;

    // An administrator runs `nvidia-smi -i 0 -mig 1` on the node: NVML changes, no API object does.
    let library = mock.library_path();
    let address = s.address.parse().unwrap();
    let mode = tokio::task::spawn_blocking(move || {
        let nvml = NvidiaBackend::load(NvidiaBackendConfig {
            library_path: Some(library),
        })
        .unwrap();
        nvml.set_mig_mode(&address, true).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(mode.current, MigState::Enabled, "an idle card switches at once");
    assert!(
        mock.state()
            .snapshot()
            .unwrap()
            .gpus
            .values()
            .all(|gpu| gpu.mig_current)
    );
    s.wait_status("MIG Enabled", |st| {
        st["currentState"]["nvidia"]["mig"]["mode"] == "Enabled"
    })
    .await;

    // DriverReady False takes capabilities and NVIDIA state away; health and the agent's fields stay.
    s.set_driver_ready("False").await;
    let status = s
        .wait_status("no capabilities", |st| {
            st.get("capabilities").is_none() && st["currentState"].get("nvidia").is_none()
        })
        .await;
    assert_eq!(status["currentState"]["driverType"], "Nvidia");
    assert!(healthy_is(&status, "True"), "{status}");
    s.set_driver_ready("True").await;
    let status = s
        .wait_status("capabilities back", |st| st.get("capabilities").is_some())
        .await;
    assert_eq!(status["currentState"]["nvidia"]["mig"]["mode"], "Enabled");
    let gpu = s.gpus.get(&s.name).await.unwrap();
    let managers: Vec<_> = gpu.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
    for manager in ["gpu-handler", "gpu-node-agent", "gpu-controller"] {
        assert!(managers.iter().any(|m| m == manager), "{managers:?}");
    }
    drop(handler);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_xid_turns_hardware_healthy_false() {
    let s = setup("handler-xid", NamedHost::H100Pcie).await;
    s.set_driver_ready("True").await;
    let mock = s.install_mock("nvml");
    let mut handler = s.start_handler(&mock.library_path());
    // True is written only once the health monitor watches the card.
    s.wait_status("HardwareHealthy True", |st| healthy_is(st, "True")).await;

    mock.state().inject_xid(s.address, 13, None, None).unwrap();
    mock.state().inject_xid(s.address, 79, None, None).unwrap();
    // The driver's recovery action (polled) and the Xid (an event) arrive in either order; the
    // condition names the Xid, the more serious, once both are in.
    let status = s
        .wait_status("HardwareHealthy False for Xid 79", |st| {
            healthy_is(st, "False")
                && healthy(st).is_some_and(|c| {
                    c["reason"] == "XidCritical" && c["message"].as_str().is_some_and(|m| m.contains("node reboot"))
                })
        })
        .await;
    let condition = healthy(&status).unwrap();
    assert_eq!(condition["reason"], "XidCritical");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "GPU 0000:41:00.0 (GPU-41b10080-0000-4000-8000-b1008e000001): critical Xid 79 (GPU has fallen off the bus) since"
        ),
        "{message}"
    );
    assert!(
        !message.contains("Xid 13"),
        "Xid 13 is an application error and not listed: {message}"
    );
    assert!(
        message.contains("the NVIDIA driver asks for a node reboot"),
        "the driver's recovery action after Xid 79: {message}"
    );
    assert!(status.get("capabilities").is_some(), "the card is still described");
    assert!(handler.is_running(), "{}", handler.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_library_health_is_unknown_and_the_handler_recovers() {
    let s = setup("handler-no-nvml", NamedHost::A30Pcie).await;
    s.set_driver_ready("True").await;
    let later = s.ws.dir.path().join("nvml-later");
    let mut handler = s.start_handler(&later.join("libnvidia-ml.so.1"));
    let status = s
        .wait_status("HardwareHealthy Unknown", |st| healthy_is(st, "Unknown"))
        .await;
    let condition = healthy(&status).unwrap();
    assert_eq!(condition["reason"], "NVMLUnavailable");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("nvml-later/libnvidia-ml.so.1"),
        "the loader's error: {message}"
    );
    assert!(status.get("capabilities").is_none() && status["currentState"].get("nvidia").is_none());
    assert!(handler.is_running(), "no crash without NVML:\n{}", handler.log());

    // The driver gets installed: the next load attempt (backoff from 0.5 s) finds the library.
    s.install_mock("nvml-later");
    let status = s
        .wait_status("HardwareHealthy True with capabilities", |st| {
            healthy_is(st, "True") && st.get("capabilities").is_some()
        })
        .await;
    assert_eq!(
        status["currentState"]["nvidia"]["gpuUUID"],
        "GPU-010a3000-0000-4000-8000-a30000000001"
    );
    assert!(handler.is_running(), "{}", handler.log());
    assert!(
        handler.log().contains("vendor library unavailable"),
        "{}",
        handler.log()
    );
    drop(s.ns);
}
