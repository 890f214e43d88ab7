//! gpu-cdi-hook: the createContainer hook of gpu-handler's CDI specs (gpu-handler copies it next to
//! its plugin socket, where the runtime can run it). `gpu-cdi-hook update-ldcache --folder <dir>...`
//! with the OCI state on standard input; see `container_ld_cache`.

use std::io::Read;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(("update-ldcache", rest)) = args.split_first().map(|(c, r)| (c.as_str(), r)) else {
        eprintln!("usage: gpu-cdi-hook update-ldcache --folder <dir>... (OCI state on stdin)");
        return ExitCode::from(2);
    };
    let folders: Vec<String> = rest
        .chunks(2)
        .filter(|pair| pair[0] == "--folder")
        .filter_map(|pair| pair.get(1).cloned())
        .collect();
    let mut state = String::new();
    let result = std::io::stdin()
        .read_to_string(&mut state)
        .map_err(|e| e.to_string())
        .and_then(|_| container_ld_cache::container_root(&state).map_err(|e| e.to_string()))
        .and_then(|root| container_ld_cache::update(&root, &folders).map_err(|e| e.to_string()));
    match result {
        Ok(outcome) => {
            eprintln!("gpu-cdi-hook update-ldcache {folders:?}: {outcome:?}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("gpu-cdi-hook update-ldcache: {error}");
            ExitCode::FAILURE
        }
    }
}
