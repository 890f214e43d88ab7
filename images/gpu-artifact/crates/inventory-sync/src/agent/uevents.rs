//! Turns kernel uevents into sync triggers. Only PCI events count; malformed payloads are logged
//! and dropped, never fatal.

use std::sync::Arc;

use component_base::Shutdown;
use futures::StreamExt;
use host_inventory::uevent::{self, UEvent};
use tokio::net::UnixDatagram;
use tokio::sync::Notify;

use crate::config::UeventSource;
use crate::metrics::AgentMetrics;

/// Starts the listener; its task ends on shutdown.
pub fn spawn(
    source: UeventSource,
    trigger: Arc<Notify>,
    shutdown: Shutdown,
    metrics: AgentMetrics,
) -> anyhow::Result<()> {
    match source {
        UeventSource::Netlink => {
            let mut events = uevent::listen()?;
            let metrics = metrics.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        next = events.next() => match next {
                            Some(Ok(event)) => on_event(&event, &trigger, &metrics),
                            // Lost events (ENOBUFS) or a bad payload: rescan rather than trust what we saw.
                            Some(Err(error)) => {
                                tracing::warn!(%error, "uevent receive problem; rescanning");
                                trigger.notify_one();
                            }
                            None => {
                                tracing::error!("kernel uevent stream ended; reopening");
                                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                                match uevent::listen() {
                                    Ok(reopened) => events = reopened,
                                    Err(error) => tracing::error!(%error, "cannot reopen the uevent socket"),
                                }
                                trigger.notify_one();
                            }
                        },
                        _ = shutdown.cancelled() => return,
                    }
                }
            });
        }
        UeventSource::Socket(path) => {
            let _ = std::fs::remove_file(&path);
            let socket = UnixDatagram::bind(&path)?;
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                loop {
                    tokio::select! {
                        received = socket.recv(&mut buffer) => match received {
                            Ok(len) => match uevent::parse(&buffer[..len]) {
                                Ok(Some(event)) => on_event(&event, &trigger, &metrics),
                                Ok(None) => {}
                                Err(error) => tracing::warn!(%error, "dropped a malformed uevent"),
                            },
                            Err(error) => { tracing::error!(%error, "uevent socket failed"); return; }
                        },
                        _ = shutdown.cancelled() => return,
                    }
                }
            });
        }
    }
    Ok(())
}

fn on_event(event: &UEvent, trigger: &Notify, metrics: &AgentMetrics) {
    if event.is_pci() {
        metrics.pci_uevent();
        tracing::debug!(action = event.action.as_str(), devpath = %event.devpath, "PCI uevent");
        trigger.notify_one();
    }
}
