//! The real node's host, for tools/testbed/node-up.sh and node/node-inside.sh:
//!   real-node-host build <root>            lays out the fixture host (cargo's output dir next to this binary)
//!   real-node-host devices <root> <dev>    makes the driver's device nodes
//!   real-node-host kernel <root> <dev>     boots the fixture's sysfs and emulates the kernel until killed
//!   real-node-host reboot <root> <state>   a new boot id; the mock GPUs' state after a power cycle
//!   real-node-host proc-hook               the OCI createContainer hook (OCI state on stdin)
//!   real-node-host wait-node-ready <node> <seconds>   (KUBECONFIG) then labels it a system node
//!   real-node-host maps <pid>              the process's maps as it sees its own files

use std::path::PathBuf;
use std::process::ExitCode;

use real_node::{host, node, proc_hook, process_maps};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["build", root] => std::env::current_exe()
            .map_err(anyhow::Error::from)
            .and_then(|exe| host::build(root.as_ref(), exe.parent().unwrap_or(&PathBuf::from(".")))),
        ["devices", root, dev] => host::make_device_nodes(root.as_ref(), dev.as_ref()),
        ["kernel", root, dev] => host::run_kernel(root.as_ref(), dev.as_ref()),
        ["reboot", root, state] => host::reboot(root.as_ref(), state.as_ref()).map(|id| println!("boot id {id}")),
        ["proc-hook"] => proc_hook::run(),
        ["maps", pid] => pid
            .parse()
            .map_err(anyhow::Error::from)
            .and_then(process_maps::print_maps),
        ["wait-node-ready", name, seconds] => seconds
            .parse()
            .map_err(anyhow::Error::from)
            .and_then(|s| node::wait_node_ready_blocking(name, s)),
        _ => {
            eprintln!("usage: real-node-host build|devices|kernel|reboot|proc-hook|wait-node-ready|maps ...");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("real-node-host: {error:#}");
            ExitCode::FAILURE
        }
    }
}
