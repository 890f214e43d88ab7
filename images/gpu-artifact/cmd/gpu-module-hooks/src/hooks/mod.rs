//! Every hook, in the fixed order that is its index in `hook config` and `hook run <index>`. Find a
//! hook by its name in `hook config`, not by its index: the order changes when hooks come and go.

mod bootstrap_nodes;
mod cleanup_on_disable;
mod feature_gates;
mod gated_pods;
mod node_groups;
mod tls_certificates;
mod unserved_nodes;

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
            config: feature_gates::config(),
            run: |input| Box::pin(feature_gates::run(input)),
        },
        Hook {
            config: tls_certificates::config(),
            run: |input| Box::pin(async move { tls_certificates::run(&input) }),
        },
        Hook {
            config: bootstrap_nodes::config(),
            run: |input| Box::pin(async move { Ok(bootstrap_nodes::run(&input)) }),
        },
        Hook {
            config: cleanup_on_disable::config(),
            run: |input| Box::pin(cleanup_on_disable::run(input)),
        },
        Hook {
            config: node_groups::config(),
            run: |input| Box::pin(async move { Ok(node_groups::run(&input)) }),
        },
    ]
}

/// The bootstrap hook's run, for the binding-context properties of `protocol`.
#[cfg(test)]
pub(crate) fn bootstrap_nodes_for_properties(input: &HookInput) -> HookOutput {
    bootstrap_nodes::run(input)
}

/// The JSON `hook config` prints: `{"version": "v1", "hooks": [...], "readiness": {...}}`.
pub fn batch_config() -> String {
    let hooks: Vec<HookConfig> = all().into_iter().map(|h| h.config).collect();
    json!({"version": "v1", "hooks": hooks, "readiness": crate::readiness::config()}).to_string()
}
