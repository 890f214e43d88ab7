//! Leader election through a Lease, so only one replica of a controller writes at a time.

use std::future::Future;

use component_base::Shutdown;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// A running election: `is_leader` flips as the Lease is won or lost. Clones follow the same
/// election, so the controllers of one process lead together.
#[derive(Clone)]
pub struct LeaderElection {
    state: watch::Receiver<bool>,
}

impl LeaderElection {
    /// Competes for Lease `namespace/name` as `identity` (the Pod name), with a 15 s lease.
    pub async fn start(client: Client, namespace: &str, name: &str, identity: &str) -> anyhow::Result<Self> {
        let manager = LeaseManagerBuilder::new(client, name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .with_field_manager(format!("{name}-leader-election"))
            .build()
            .await?;
        let (state, _task) = manager.watch().await;
        Ok(Self { state })
    }

    /// The election a controller Deployment configures: none when `LEADER_ELECTION=false` (a single
    /// replica in tests), else Lease `$POD_NAMESPACE/<name>` (default namespace `d8-gpu`).
    pub async fn from_env(client: Client, name: &str, identity: &str) -> anyhow::Result<Option<Self>> {
        if std::env::var("LEADER_ELECTION").is_ok_and(|v| v == "false") {
            return Ok(None);
        }
        let namespace = std::env::var("POD_NAMESPACE").ok().filter(|n| !n.is_empty());
        let namespace = namespace.as_deref().unwrap_or("d8-gpu");
        Ok(Some(Self::start(client, namespace, name, identity).await?))
    }

    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// Waits until this replica leads. Returns false if the election stopped.
    pub async fn wait_for_leadership(&mut self) -> bool {
        self.state.wait_for(|leading| *leading).await.is_ok()
    }

    /// Waits until leadership is lost (the caller then stops writing).
    pub async fn wait_for_loss(&mut self) {
        let _ = self.state.wait_for(|leading| !*leading).await;
    }
}

/// Runs `work` while this replica leads (always, without an election), from the start each time
/// leadership is won; stops it when leadership is lost, and returns on shutdown, when the election
/// ends, or when `work` returns. `what` names the work in the logs.
pub async fn while_leading<F, Fut>(mut election: Option<LeaderElection>, shutdown: Shutdown, what: &str, mut work: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        if let Some(election) = election.as_mut() {
            tokio::select! {
                leading = election.wait_for_leadership() => if !leading { return },
                _ = shutdown.cancelled() => return,
            }
            tracing::info!("leading: {what}");
        }
        let lost = async {
            match election.as_mut() {
                Some(election) => election.wait_for_loss().await,
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            _ = work() => return,
            _ = lost => tracing::warn!("lost leadership: stopped {what}"),
            _ = shutdown.cancelled() => return,
        }
    }
}
