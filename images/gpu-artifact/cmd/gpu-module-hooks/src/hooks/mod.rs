//! Every hook, in the fixed order that is its index in `hook config` and `hook run <index>`.

mod bootstrap_nodes;
mod ensure_crds;
mod feature_discovery;
mod tls_certificates;

use std::future::Future;
use std::pin::Pin;

use serde_json::json;

use crate::protocol::{HookConfig, HookInput, HookOutput};

type HookFuture = Pin<Box<dyn Future<Output = anyhow::Result<HookOutput>>>>;

pub struct Hook {
    pub config: HookConfig,
    pub run: fn(HookInput) -> HookFuture,
}

pub fn all() -> Vec<Hook> {
    vec![
        Hook {
            config: ensure_crds::config(),
            run: |input| Box::pin(ensure_crds::run(input)),
        },
        Hook {
            config: feature_discovery::config(),
            run: |input| Box::pin(feature_discovery::run(input)),
        },
        Hook {
            config: tls_certificates::config(),
            run: |input| Box::pin(async move { tls_certificates::run(&input) }),
        },
        Hook {
            config: bootstrap_nodes::config(),
            run: |input| Box::pin(async move { Ok(bootstrap_nodes::run(&input)) }),
        },
    ]
}

/// The bootstrap hook's run, for the binding-context properties of `protocol`.
#[cfg(test)]
pub(crate) fn bootstrap_nodes_for_properties(input: &HookInput) -> HookOutput {
    bootstrap_nodes::run(input)
}

/// The JSON `hook config` prints: `{"version": "v1", "hooks": [...]}`.
pub fn batch_config() -> String {
    let hooks: Vec<HookConfig> = all().into_iter().map(|h| h.config).collect();
    json!({"version": "v1", "hooks": hooks}).to_string()
}
