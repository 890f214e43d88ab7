//! gpu-module-hooks: the module's hooks for Deckhouse's addon-operator, one static binary speaking the
//! batch-hook CLI (`hook list`, `hook config`, `hook run <index>`). It holds no business logic: CRDs,
//! TLS material, where the node components run, and what the API server can do.
//!
//! Built static so addon-operator may run it chrooted: in werf with
//! `RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target x86_64-unknown-linux-gnu`.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod certificates;
mod hooks;
mod protocol;

use std::process::ExitCode;

use protocol::{HookInput, HookOutput};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["hook" | "hooks", "list"] => {
            let all = hooks::all();
            println!("Found {} items:", all.len());
            for (index, hook) in all.iter().enumerate() {
                println!("{index} - {}", hook.config.metadata.name);
            }
            ExitCode::SUCCESS
        }
        ["hook", "config"] => {
            println!("{}", hooks::batch_config());
            ExitCode::SUCCESS
        }
        ["hook", "run", index] => match run(index) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                // addon-operator shows stderr as the hook's error and retries the task.
                eprintln!("{}", serde_json::json!({"message": format!("execute: {error:#}")}));
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: gpu-module-hooks hook list | hook config | hook run <index>");
            ExitCode::from(2)
        }
    }
}

fn run(index: &str) -> anyhow::Result<()> {
    let all = hooks::all();
    let hook = index
        .parse::<usize>()
        .ok()
        .and_then(|i| all.get(i))
        .ok_or_else(|| anyhow::anyhow!("no hook {index:?}: there are {}", all.len()))?;
    let input = HookInput::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let output: HookOutput = runtime.block_on((hook.run)(input))?;
    output.write_to_env_files()
}
