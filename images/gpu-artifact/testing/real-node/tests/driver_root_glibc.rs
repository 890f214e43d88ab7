//! gpu-handler runs on any host's glibc. The fixture host's driver root carries a glibc build of its own
//! (src/host/host_glibc.rs), which refuses the images' loader as a real host's libc does. gpu-handler and
//! everything it runs map one glibc each, never the images' loader with the host's libc:
//! - gpu-handler maps the image's loader and libc, and NVML by its path in the driver root;
//! - an MPS control daemon (the card's static Pod, gpu-handler's image running driver-tool) maps the
//!   host's loader and libc, in its chroot into the driver root.
//!
//! What each process maps is read as the process sees its own files (`real-node-host maps`), and which
//! glibc build a mapped file is comes from its content: the fixture's build has `_rtld_globbK`.

mod support;

use std::process::Command;

use real_node::process_maps::{MappedFile, mapped_files};
use support::module::wait_module_ready;
use support::*;

/// The fixture host's glibc build: its private symbol's name.
const HOST_BUILD_MARK: &[u8] = b"_rtld_globbK";

/// Machine pids of the node's processes whose command line starts with `argv0` and has `arg`.
fn processes(argv0: &str, arg: Option<&str>) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().map(String::as_str) == Some(argv0) && arg.is_none_or(|a| args.iter().any(|x| x == a)) {
            found.push(pid);
        }
    }
    found
}

/// The process's mapped files, as it sees them.
fn maps(pid: u32) -> Vec<MappedFile> {
    let out = Command::new(env!("CARGO_BIN_EXE_real-node-host"))
        .args(["maps", &pid.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "maps of {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    mapped_files(&String::from_utf8(out.stdout).unwrap())
}

/// The glibc parts a process maps: (loader, libc), each with its path and whether it is the fixture
/// host's build.
fn glibc_of(pid: u32) -> ((String, bool), (String, bool)) {
    let files = maps(pid);
    let part = |name: &str| -> (String, bool) {
        let file = files
            .iter()
            .find(|f| f.path.rsplit('/').next().is_some_and(|base| base.starts_with(name)))
            .unwrap_or_else(|| panic!("process {pid} maps no {name}: {files:?}"));
        let bytes = std::fs::read(format!("/proc/{pid}/map_files/{}", file.range)).unwrap();
        let host_build = bytes.windows(HOST_BUILD_MARK.len()).any(|w| w == HOST_BUILD_MARK);
        (file.path.clone(), host_build)
    };
    (part("ld-linux-x86-64.so"), part("libc.so.6"))
}

#[tokio::test]
async fn gpu_handler_and_its_mps_daemon_each_map_one_glibc() {
    let _cards = CARDS.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;

    // gpu-handler: the image's loader and libc; NVML by its path in the driver root.
    let handlers = processes("/app/gpu-handler", None);
    let handler = *handlers.first().expect("gpu-handler runs");
    let ((loader, loader_host), (libc, libc_host)) = glibc_of(handler);
    assert!(
        !loader.starts_with("/driver-root") && !libc.starts_with("/driver-root"),
        "gpu-handler maps {loader} and {libc}"
    );
    assert!(
        !loader_host && !libc_host,
        "gpu-handler runs on the host's glibc build: {loader}, {libc}"
    );
    assert!(
        maps(handler).iter().any(|f| f
            .path
            .starts_with("/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so")),
        "gpu-handler maps no NVML from the driver root"
    );

    // An MPS share: the card's control daemon, a static Pod of gpu-handler's image, runs in the
    // foreground (`-f`) through driver-tool.
    let ns = namespace(&client, "glibc-mps").await;
    mps_share_claim(&client, &node.name, &ns, "share", 50).await;
    let pod = workload_pod("share", "sleep 600", &[("gpu", "share")], &[]);
    create_pod(&client, &ns, &pod).await;
    wait_phase(&client, &ns, "share", "Running").await;
    let daemons = processes("/usr/bin/nvidia-cuda-mps-control", Some("-f"));
    let daemon = *daemons.first().expect("the card's MPS control daemon runs");
    let ((loader, loader_host), (libc, libc_host)) = glibc_of(daemon);
    assert!(
        loader_host && libc_host,
        "the MPS daemon must run on the host's own glibc build: {loader}, {libc}"
    );
    assert!(
        !loader.starts_with("/driver-root") && !libc.starts_with("/driver-root"),
        "the MPS daemon sees its glibc in its own root, the driver root: {loader}, {libc}"
    );
    delete_namespace(&client, &ns).await;
}
