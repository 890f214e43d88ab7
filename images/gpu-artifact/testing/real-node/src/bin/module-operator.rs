//! module-operator --chart <module root> --images <images.json> --hooks <gpu-module-hooks> [--node-host <dir>]
//! (HELM_BIN, KUBECONFIG, OWNER_PID): installs the module and keeps it converged; see
//! `real_node::operator`.

use std::path::PathBuf;

use real_node::operator::{self, OperatorConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| -> anyhow::Result<PathBuf> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
            .ok_or_else(|| anyhow::anyhow!("missing {name}"))
    };
    let config = OperatorConfig {
        chart: arg("--chart")?,
        images: arg("--images")?,
        hooks_binary: arg("--hooks")?,
        helm: PathBuf::from(std::env::var("HELM_BIN")?),
        owner_pid: std::env::var("OWNER_PID").ok().and_then(|p| p.parse().ok()),
        node_host: arg("--node-host").ok(),
    };
    operator::run(config).await
}
