//! Watches claims, slices, classes, admin DeviceTaintRules (`taint_rule_watch`) and Pods; while this replica leads, runs an allocation round
//! after every burst of changes. Slice, class and claim events also go to the one engine (see
//! `engine_feed`), before the stores see them, so a round's engine is never older than its
//! snapshot; slices go to the engine alone. When the next round runs is `round_schedule`'s to
//! say; a write refused by the fence ends the round.

use std::sync::Arc;
use std::time::Duration;

use component_base::{Readiness, Shutdown};
use controller_plumbing::LeaderElection;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::{Notify, watch as tokio_watch};
use tokio::time::Instant;

use crate::FIELD_MANAGER;
use crate::allocation_clock::AllocationClock;
use crate::claim_store::{ClaimStore, claim_store};
use crate::claim_writes::ClaimWrites;
use crate::engine_feed::EngineFeed;
use crate::engine_thread::EngineThread;
use crate::fencing::{Fence, NotLeading};
use crate::lean_objects::without_managed_fields;
use crate::lean_pod::LeanPod;
use crate::metrics::Metrics;
use crate::node_facts::NodeFactStores;
use crate::node_watch::watch_nodes;
use crate::note_events::NoteEvents;
use crate::pass::{Memory, Round, Snapshot};
use crate::round_schedule::{NextRound, RoundOutcome, RoundSchedule};
use crate::taint_rule_watch::watch_taint_rules;

/// Quiet time that ends a burst of watch events: one round per burst.
/// Short: a gated Pod waits it out once before its round (the gate's cost, `make bench`
/// gate_cost); a burst of events closer than this still makes one round.
const BURST_WINDOW: Duration = Duration::from_millis(10);
pub const READY_GATE: &str = "caches-synced";

struct Stores {
    claims: ClaimStore,
    classes: Store<DeviceClass>,
    pods: Store<LeanPod>,
    nodes: Store<Node>,
}

/// Hands a watch event to the engine.
type Forward<K> = fn(&mut EngineFeed, watcher::Event<K>);

/// Objects per page of a first list (and of a relist): a page is whole objects in memory until
/// the engine and the stores have taken what they keep. The API server's default is 500, which
/// for ResourceSlices of eight cards with every MIG offer is about 50 MiB at once.
const LIST_PAGE: u32 = 25;

fn list_in_pages() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE)
}

/// The watch of `api`, each event handed to the engine (a copy, when `engine` is given) before it
/// goes on.
fn events_through_engine<K>(
    api: Api<K>,
    engine: Option<(EngineThread, Forward<K>)>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    watcher(api, list_in_pages())
        .backoff(controller_plumbing::WatchBackoff::default())
        .then(move |event| {
            let engine = engine.clone();
            async move {
                if let (Ok(event), Some((engine, forward))) = (&event, engine) {
                    let event = event.clone();
                    engine.send(move |feed| forward(feed, event)).await;
                }
                event
            }
        })
}

/// Watches `api` into a store: every event goes to the engine first (a copy, when `engine` is
/// given), then `lean` trims the object for the store (see `lean_objects`), and the round is
/// triggered.
fn watch<K>(api: Api<K>, trigger: Arc<Notify>, engine: Option<(EngineThread, Forward<K>)>, lean: fn(&mut K)) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = events_through_engine(api, engine)
        .modify(lean)
        .reflect(writer)
        .for_each(move |event| {
            if let Err(error) = event {
                tracing::warn!(%error, "watch error");
            }
            trigger.notify_one();
            futures::future::ready(())
        });
    tokio::spawn(stream);
    store
}

/// Watches claims into the engine, then into the claim store (see `stored_claims`), which tells
/// `clock` every change.
fn watch_claims(
    api: Api<ResourceClaim>,
    trigger: Arc<Notify>,
    engine: EngineThread,
    clock: AllocationClock,
) -> ClaimStore {
    let (store, writer) = claim_store();
    let mut writer = writer.with_clock(clock);
    let stream = events_through_engine(api, Some((engine, EngineFeed::claim_event))).for_each(move |event| {
        match event {
            Ok(event) => writer.apply(event),
            Err(error) => tracing::warn!(%error, "watch error"),
        }
        trigger.notify_one();
        futures::future::ready(())
    });
    tokio::spawn(stream);
    store
}

/// Watches ResourceSlices for the engine alone, which keeps them in its compact form; no store
/// keeps a copy. The receiver turns true once the first list is in the engine's queue.
fn watch_slices(api: Api<ResourceSlice>, trigger: Arc<Notify>, engine: EngineThread) -> tokio_watch::Receiver<bool> {
    let (listed, synced) = tokio_watch::channel(false);
    let stream = watcher(api, list_in_pages())
        .backoff(controller_plumbing::WatchBackoff::default())
        .for_each(move |event| {
            let (engine, trigger, listed) = (engine.clone(), trigger.clone(), listed.clone());
            async move {
                match event {
                    Ok(event) => {
                        let done = matches!(event, watcher::Event::InitDone);
                        engine.send(move |feed| feed.slice_event(event)).await;
                        if done {
                            listed.send_replace(true);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "watch error"),
                }
                trigger.notify_one();
            }
        });
    tokio::spawn(stream);
    synced
}

pub async fn run(
    client: Client,
    metrics: Metrics,
    mut election: Option<LeaderElection>,
    readiness: Readiness,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    readiness.register(READY_GATE);
    let engine = EngineThread::start()?;
    let trigger = Arc::new(Notify::new());
    let stores = Stores {
        claims: watch_claims(
            Api::all(client.clone()),
            trigger.clone(),
            engine.clone(),
            metrics.clock.clone(),
        ),
        classes: watch(
            Api::all(client.clone()),
            trigger.clone(),
            Some((engine.clone(), EngineFeed::class_event)),
            without_managed_fields,
        ),
        pods: watch(Api::all(client.clone()), trigger.clone(), None, |_| {}),
        nodes: watch_nodes(&client, trigger.clone()),
    };
    let mut slices = watch_slices(Api::all(client.clone()), trigger.clone(), engine.clone());
    let mut taint_rules = watch_taint_rules(&client, trigger.clone(), engine.clone()).await?;
    let node_facts = NodeFactStores::watch(&client, trigger.clone());
    tokio::select! {
        synced = async {
            stores.claims.wait_until_ready().await?;
            slices.wait_for(|listed| *listed).await?;
            taint_rules.wait_for(|listed| *listed).await?;
            stores.classes.wait_until_ready().await?;
            stores.pods.wait_until_ready().await?;
            stores.nodes.wait_until_ready().await?;
            anyhow::Ok(())
        } => synced?,
        _ = shutdown.cancelled() => return Ok(()),
    }
    readiness.set(READY_GATE, true);
    let identity = std::env::var("POD_NAME").ok();
    let events = NoteEvents::new(client.clone(), FIELD_MANAGER, identity);
    let mut fence = election.as_ref().map(|e| {
        let lease = e.lease();
        Fence::new(client.clone(), &lease.namespace, &lease.name, &lease.identity)
    });
    let mut memory = Memory::default();
    // The module's switch (`gpuDraController.preemption`, passed as `PREEMPTION`): on unless Disabled.
    memory.preemption.enabled = std::env::var("PREEMPTION").map_or(true, |v| v != "Disabled");
    let mut no_retry = kube::Config::infer().await?;
    no_retry.default_retry = false;
    memory.preemption.eviction_client = Some(Client::try_from(no_retry)?);
    let mut schedule = RoundSchedule::default();
    let mut term_begun = false;
    trigger.notify_one();
    loop {
        if let Some(election) = election.as_mut()
            && !election.is_leader()
        {
            term_begun = false;
            tokio::select! {
                leading = election.wait_for_leadership() => if !leading { return Ok(()) },
                _ = shutdown.cancelled() => return Ok(()),
            }
            tracing::info!("leading: allocating");
        }
        if let Some(fence) = fence.as_mut()
            && !term_begun
        {
            if let Err(error) = fence.begin_term().await {
                tracing::warn!(%error, "elected, but the Lease does not show this term yet");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            term_begun = true;
        }
        match schedule.next() {
            NextRound::At(at) => tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = shutdown.cancelled() => return Ok(()),
            },
            NextRound::OnChange { at_the_latest } => {
                let due = async {
                    match at_the_latest {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => futures::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = trigger.notified() => {}
                    _ = due => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
        }
        while tokio::time::timeout(BURST_WINDOW, trigger.notified()).await.is_ok() {}
        if election.as_ref().is_some_and(|e| !e.is_leader()) {
            continue;
        }
        let snapshot = Snapshot {
            claims: stores.claims.state(),
            classes: stores.classes.state(),
            pods: stores.pods.state(),
            nodes: stores.nodes.state(),
            facts: node_facts.facts(),
        };
        let mut round = Round {
            engine: &engine,
            writes: ClaimWrites {
                client: &client,
                fence: fence.as_ref(),
            },
            events: &events,
            metrics: &metrics,
            memory: &mut memory,
            claims: Some(&stores.claims),
        };
        let outcome = match round.run(snapshot).await {
            Ok(end) => RoundOutcome::Done { again_in: end.again_in },
            Err(error) if error.downcast_ref::<NotLeading>().is_some() => {
                // Leadership moved on since the round began: it stopped before writing; the term
                // is checked again before the next round.
                tracing::warn!(error = %format!("{error:#}"), "not leading: the round stopped before writing");
                term_begun = false;
                RoundOutcome::NotLeading
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "allocation round failed; backing off");
                RoundOutcome::Failed
            }
        };
        schedule.ended(outcome, Instant::now());
    }
}
