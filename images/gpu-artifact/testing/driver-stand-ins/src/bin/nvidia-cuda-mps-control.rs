//! nvidia-cuda-mps-control stand-in (see `driver_stand_ins::mps`).

use std::io::Read;
use std::process::ExitCode;

use driver_stand_ins::mps::{self, MpsDirs};

fn main() -> ExitCode {
    let dirs = MpsDirs::from_env();
    let arg = std::env::args().nth(1);
    let result = match arg.as_deref() {
        Some("-d") => std::env::current_exe()
            .map_err(|e| e.to_string())
            .and_then(|exe| mps::start_daemon(&exe, &dirs)),
        // `-f`: in the foreground, as a static Pod's container runs it; `--daemon`: the child `-d` starts.
        Some("-f" | "--daemon") => mps::run_daemon(&dirs),
        None => {
            let mut commands = String::new();
            let _ = std::io::stdin().read_to_string(&mut commands);
            mps::send(&dirs, &commands)
        }
        Some(other) => Err(format!("unknown option {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
