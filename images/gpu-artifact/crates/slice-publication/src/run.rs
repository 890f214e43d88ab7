//! The publisher's life: read the server version once, watch the Node, and publish whenever the
//! eligible cards or the Node's offer labels change, or a slice of the node was deleted (the kubelet
//! wipes them when it starts). Nothing periodic: an unchanged input is never re-sent.

use anyhow::Context;
use component_base::Shutdown;
use controller_plumbing::{Backoff, retry_until_ok};
use dra_offers::{CardHoldings, CardOffering, DeviceCatalog, Layout};
use k8s_openapi::apimachinery::pkg::version::Info;
use tokio::sync::watch;

use crate::metrics::{COUNTERS_DROPPED, PublicationMetrics, SHARING_DROPPED, TAINTS_DROPPED};
use crate::node_watch::{NodeView, watch_node};
use crate::publisher::{Publisher, PublisherConfig};
use crate::slice_watch::watch_deletions;

/// Where the publisher tells what it published.
pub struct PublishedSenders {
    /// The offers in the published slices.
    pub catalog: watch::Sender<DeviceCatalog>,
    /// Every device of the node's cards, withheld ones included (claims prepared before may still
    /// use them, and the kubelet is told their health).
    pub all_devices: watch::Sender<DeviceCatalog>,
}

/// Runs until `shutdown` (or until the sender of `cards` is dropped). Publishes the node's pool
/// for `cards`, republishing when they or the Node's offer labels (`allow-mig`, `allow-timeslicing`,
/// `allow-mps`) change, and sends what is published on `published`. Failed writes are retried with
/// backoff; they never end it.
pub async fn run(
    client: kube::Client,
    config: PublisherConfig,
    cards: watch::Receiver<Vec<CardOffering>>,
    published: PublishedSenders,
    metrics: PublicationMetrics,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let (_never_held, holdings) = watch::channel(CardHoldings::new());
    run_with_holdings(client, config, cards, holdings, published, metrics, shutdown).await
}

/// [`run`] for a node whose cards are held as `holdings` say (by the claims the node prepared):
/// republishes when they change, leaving out the offers a held card cannot give.
pub async fn run_with_holdings(
    client: kube::Client,
    config: PublisherConfig,
    mut cards: watch::Receiver<Vec<CardOffering>>,
    mut holdings: watch::Receiver<CardHoldings>,
    PublishedSenders { catalog, all_devices }: PublishedSenders,
    metrics: PublicationMetrics,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let version = retry_until_ok("reading the API server version", &shutdown, || {
        client.apiserver_version()
    })
    .await;
    let Some(version) = version else {
        return Ok(());
    };
    let (major, minor) = server_version(&version)?;
    let layout = Layout::for_server(major, minor);
    // The taint effect None arrived in 1.35; 1.34 refuses it.
    let none_effect = major > 1 || minor >= 35;
    tracing::info!(server = %version.git_version, ?layout, none_effect, "publishing ResourceSlices");
    for reason in [COUNTERS_DROPPED, SHARING_DROPPED, TAINTS_DROPPED] {
        metrics.set_reduced(reason, false);
    }

    let (node_sender, mut node) = watch::channel::<Option<NodeView>>(None);
    let node_watch = tokio::spawn(watch_node(client.clone(), config.node_name.clone(), node_sender));
    let deleted = std::sync::Arc::new(tokio::sync::Notify::new());
    let slice_watch = tokio::spawn(watch_deletions(
        client.clone(),
        config.node_name.clone(),
        config.driver_name.clone(),
        deleted.clone(),
    ));
    let mut publisher = Publisher::new(client, &config, layout, none_effect, metrics);
    let mut backoff = Backoff::default();
    loop {
        let seen = tokio::select! {
            seen = node.wait_for(Option::is_some) => seen.map(|view| view.clone()),
            _ = shutdown.cancelled() => break,
        };
        let Ok(Some(view)) = seen else {
            break;
        };
        let input = cards.borrow_and_update().clone();
        let held = holdings.borrow_and_update().clone();
        let pause = match publisher.publish(&input, &held, &view).await {
            Ok(published) => {
                catalog.send_replace(published.catalog);
                all_devices.send_if_modified(|current| {
                    let changed = *current != published.all_devices;
                    if changed {
                        *current = published.all_devices;
                    }
                    changed
                });
                backoff = Backoff::default();
                None
            }
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = format!("{error:#}"), retry_in = ?delay, "publishing ResourceSlices failed");
                Some(delay)
            }
        };
        let retry = async {
            match pause {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = retry => {}
            changed = cards.changed() => if changed.is_err() { break },
            _ = changed_or_never(&mut holdings) => {}
            _ = node.changed() => {}
            _ = deleted.notified() => {}
            _ = shutdown.cancelled() => break,
        }
    }
    node_watch.abort();
    slice_watch.abort();
    Ok(())
}

/// Resolves when the holdings change; never once their sender is gone (they cannot change again).
async fn changed_or_never(holdings: &mut watch::Receiver<CardHoldings>) {
    if holdings.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The (major, minor) of a server whose version is `info` (`minor` may carry a `+`, as on some
/// distributions).
fn server_version(info: &Info) -> anyhow::Result<(u32, u32)> {
    let number = |text: &str| -> anyhow::Result<u32> {
        let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .with_context(|| format!("API server version {}.{}", info.major, info.minor))
    };
    Ok((number(&info.major)?, number(&info.minor)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_version_is_read_like_distributions_spell_it() {
        let info = |major: &str, minor: &str| Info {
            major: major.into(),
            minor: minor.into(),
            ..Info::default()
        };
        assert_eq!(server_version(&info("1", "34")).unwrap(), (1, 34));
        assert_eq!(server_version(&info("1", "34+")).unwrap(), (1, 34));
        assert_eq!(server_version(&info("1", "37")).unwrap(), (1, 37));
        assert!(server_version(&info("", "")).is_err());
    }
}
