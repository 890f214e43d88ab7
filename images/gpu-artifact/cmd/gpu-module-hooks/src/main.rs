//! gpu-module-hooks: the module's hooks for Deckhouse's addon-operator, one static binary speaking the
//! batch-hook CLI (`hook list`, `hook config`, `hook run <index>`, `hook ready`). It holds no business
//! logic: TLS material, where the node components run, which feature gates are on, the Module's
//! readiness, and the cleanup when the module is disabled. CRDs are addon-operator's (it installs
//! `crds/`).
//!
//! Built static so addon-operator may run it chrooted: in werf with
//! `RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target x86_64-unknown-linux-gnu`.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod certificates;
mod gates;
mod hooks;
mod object_patch;
mod protocol;
mod readiness;

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
        ["hook", "run", index] => finish(run(index)),
        ["hook", "ready"] => finish(ready()),
        _ => {
            eprintln!("usage: gpu-module-hooks hook list | hook config | hook run <index> | hook ready");
            ExitCode::from(2)
        }
    }
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // addon-operator shows stderr as the hook's error and retries the task.
            eprintln!("{}", serde_json::json!({"message": format!("execute: {error:#}")}));
            ExitCode::FAILURE
        }
    }
}

/// `hook ready`: the readiness hook for the Module `MODULE_NAME` (addon-operator passes it).
fn ready() -> anyhow::Result<()> {
    let module = std::env::var("MODULE_NAME").ok().filter(|m| !m.is_empty());
    let module = module.unwrap_or_else(|| protocol::MODULE_KEY.to_owned());
    let input = HookInput::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(readiness::run(input, &module))?.write_to_env_files()
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
