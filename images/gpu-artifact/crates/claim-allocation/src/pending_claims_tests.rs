//! A round's attempt at claims that fit nowhere, with the engine on its thread: what the round
//! remembers of them is the engine's reason, once per interval. Events go to an API server that is
//! not there (publishing them is logged, never fatal); nothing else is written.

use super::*;
use crate::claim_writes::ClaimWrites;
use crate::engine_feed::EngineFeed;
use crate::engine_thread::EngineThread;
use crate::metrics::Metrics;
use crate::note_events::NoteEvents;
use crate::pass::Memory;
use crate::pending_notes::EXPLAIN_INTERVAL;
use crate::pending_reason::NodeFacts;
use crate::test_objects::{claim, class, device_classes, slices};
use kube::runtime::watcher::Event;

async fn engine_with_one_card_held() -> EngineThread {
    let engine = EngineThread::start().unwrap();
    let mut classes = device_classes();
    classes.push(class(
        "gpu-broken",
        r#"device.attributes["gpu.deckhouse.io"].deviceType =="#,
    ));
    for class in classes {
        engine
            .send(move |feed: &mut EngineFeed| feed.class_event(Event::Apply(class)))
            .await;
    }
    for slice in slices("n1", 1) {
        engine
            .send(move |feed: &mut EngineFeed| feed.slice_event(Event::Apply(slice)))
            .await;
    }
    let mut whole = claim("whole", "gpu-physical", 1, 3);
    let held = engine
        .call(move |feed| {
            let allocation = feed.engine.allocate(&whole, None).unwrap().unwrap();
            whole.status.get_or_insert_with(Default::default).allocation = Some(allocation);
            feed.claim_event(Event::Apply(whole));
        })
        .await;
    assert!(held.is_ok());
    engine
}

/// What a round borrows besides the engine: a client of an API server that is not there, its
/// Events and metrics, and the controller's memory.
struct RoundParts {
    client: kube::Client,
    events: NoteEvents,
    metrics: Metrics,
    memory: Memory,
}

impl RoundParts {
    fn new() -> RoundParts {
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        RoundParts {
            events: NoteEvents::new(client.clone(), "test", None),
            metrics: Metrics::register(&mut prometheus_client::registry::Registry::default()),
            memory: Memory::default(),
            client,
        }
    }

    fn round<'a>(&'a mut self, engine: &'a EngineThread) -> Round<'a> {
        Round {
            engine,
            writes: ClaimWrites {
                client: &self.client,
                fence: None,
            },
            events: &self.events,
            metrics: &self.metrics,
            memory: &mut self.memory,
            claims: None,
        }
    }
}

fn snapshot() -> Snapshot {
    Snapshot {
        claims: vec![],
        classes: device_classes().into_iter().map(Arc::new).collect(),
        pods: vec![],
        nodes: vec![],
        facts: NodeFacts::default(),
    }
}

#[tokio::test]
async fn a_claim_that_fits_nowhere_keeps_the_engines_reason_once_per_interval() {
    let engine = engine_with_one_card_held().await;
    let mut parts = RoundParts::new();
    let mut round = parts.round(&engine);
    let (snapshot, mut end) = (snapshot(), RoundEnd::default());
    let mig = Arc::new(claim("p", "gpu-mig", 1, 5));
    let got = round
        .try_allocate(&mig, Placement::Anywhere, None, &snapshot, &mut end)
        .await
        .unwrap();
    assert!(got.is_none());
    assert_eq!(
        round.memory.pending.text("p"),
        Some("cannot allocate: node n1: request gpu: devices or their cards' counters taken by ns/whole")
    );
    assert_eq!(end.again_in, None);

    let again = round
        .try_allocate(&mig, Placement::Anywhere, None, &snapshot, &mut end)
        .await
        .unwrap();
    assert!(again.is_none());
    let wait = end.again_in.expect("the rate-limited reason is due later");
    assert!(wait <= EXPLAIN_INTERVAL && wait > EXPLAIN_INTERVAL / 2, "{wait:?}");
    assert_eq!(end.explained, 1, "explained once");

    let broken = Arc::new(claim("b", "gpu-broken", 1, 5));
    round
        .try_allocate(&broken, Placement::Anywhere, None, &snapshot, &mut end)
        .await
        .unwrap();
    let text = round.memory.pending.text("b").unwrap();
    assert!(
        text.starts_with("cannot allocate: claim ns/b: class gpu-broken: selector #0: "),
        "{text}"
    );

    // Once the card is given back, the claim is allocated (and nothing is remembered of it once
    // the round writes it; here the write has no server, so only the attempt is checked).
    engine
        .call(|feed| feed.claim_event(Event::Delete(claim("whole", "gpu-physical", 1, 4))))
        .await
        .unwrap();
    let fits = round
        .try_allocate(&mig, Placement::Anywhere, None, &snapshot, &mut end)
        .await
        .unwrap();
    assert!(fits.is_some(), "the engine followed the deletion");
}

#[test]
fn the_pod_is_told_which_claim_and_why() {
    assert_eq!(
        pod_note(
            "p-gpu-1",
            "cannot allocate: node n1: request gpu: no device of class gpu-vfio"
        ),
        "claim p-gpu-1 cannot be allocated: node n1: request gpu: no device of class gpu-vfio"
    );
    assert_eq!(pod_note("c", &"x".repeat(2000)).len(), 1024);
}

#[tokio::test]
async fn mps_claims_of_two_namespaces_in_one_round_go_to_two_cards() {
    use crate::mps_tenancy::tests::{class, first_device, share, slice};
    let engine = EngineThread::start().unwrap();
    engine
        .send(move |feed: &mut EngineFeed| feed.class_event(Event::Apply(class())))
        .await;
    engine
        .send(move |feed: &mut EngineFeed| feed.slice_event(Event::Apply(slice())))
        .await;
    let mut parts = RoundParts::new();
    let mut round = parts.round(&engine);
    let (snapshot, mut end) = (snapshot(), RoundEnd::default());
    let mut devices = Vec::new();
    for (namespace, name) in [("a", "first"), ("a", "second"), ("b", "third")] {
        let claim = Arc::new(share(namespace, name));
        let allocation = round
            .try_allocate(&claim, Placement::Anywhere, None, &snapshot, &mut end)
            .await
            .unwrap()
            .expect("fits");
        devices.push(first_device(&allocation));
    }
    assert_eq!(devices, ["gpu0-mps", "gpu0-mps", "gpu1-mps"]);
    let late = Arc::new(share("c", "fourth"));
    let got = round
        .try_allocate(&late, Placement::Anywhere, None, &snapshot, &mut end)
        .await
        .unwrap();
    assert!(got.is_none(), "both cards have another namespace's MPS clients");
    assert_eq!(
        round.memory.pending.text("fourth"),
        Some(
            "cannot allocate: node w1: request gpu: no device of class gpu-mps; the MPS offers of 2 GPUs were left \
             out: another namespace's MPS claims use them, and a GPU serves the MPS claims of one namespace at a time"
        )
    );
}
