//! nvidia-smi stand-in: `-L` lists the GPUs and MIG devices this process can open; without
//! arguments a summary; `compute-policy -i <uuid> --set-timeslice <0..3>` checks the GPU exists
//! (what the node's time-slicing runs). Anything else fails with the usage, as the real tool does.

use std::process::ExitCode;

use driver_stand_ins::gpu_list;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nvml = match gpu_list::nvml() {
        Ok(nvml) => nvml,
        Err(error) => {
            eprintln!("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver: {error}");
            return ExitCode::from(9);
        }
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        [] => gpu_list::summary(&nvml),
        ["-L"] | ["--list-gpus"] => gpu_list::list(&nvml),
        ["compute-policy", "-i", uuid, "--set-timeslice", level] if level.parse::<u8>().is_ok_and(|l| l <= 3) => nvml
            .device_by_uuid(*uuid)
            .map(|_| format!("Set compute policy timeslice to {level} for GPU {uuid}.\n")),
        _ => {
            eprintln!("usage: nvidia-smi [-L | compute-policy -i <uuid> --set-timeslice <0-3>]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nvidia-smi: {error}");
            ExitCode::FAILURE
        }
    }
}
