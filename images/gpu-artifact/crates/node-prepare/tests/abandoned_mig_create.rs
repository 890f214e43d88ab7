//! A MIG create that does not return in time (a GPU stuck in the driver, a GSP timeout) and lands
//! after the prepare gave up on it. The instance it makes is the claim's: the claim's retry or the
//! node's next reconciliation takes it away, and it never becomes an instance "no claim records"
//! that blocks its placement until an admin removes it.

mod support;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gpu_vendor::{
    GpuInventory, GpuProcess, HealthMonitor, HealthReading, MigInstance, MigMode, MigPlacement, MigProfile, PciAddress,
    VendorBackend, VendorError,
};
use node_prepare::{ClaimState, NodePrepareConfig, NodePreparer, PrepareError, ReconcileReport};
use nvidia_backend::NvidiaBackend;
use support::{Node, mig_request};

/// The mock library, whose MIG creates wait until the test opens the gate.
struct HeldCreates {
    inner: NvidiaBackend,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl HeldCreates {
    fn wait_for_gate(&self) {
        let (open, opened) = &*self.gate;
        let mut is_open = open.lock().unwrap();
        while !*is_open {
            is_open = opened.wait(is_open).unwrap();
        }
    }
}

impl VendorBackend for HeldCreates {
    fn devices(&self) -> Result<Vec<PciAddress>, VendorError> {
        self.inner.devices()
    }
    fn inventory(&self, card: &PciAddress) -> Result<GpuInventory, VendorError> {
        self.inner.inventory(card)
    }
    fn mig_profiles(&self, card: &PciAddress) -> Result<Vec<MigProfile>, VendorError> {
        self.inner.mig_profiles(card)
    }
    fn mig_mode(&self, card: &PciAddress) -> Result<Option<MigMode>, VendorError> {
        self.inner.mig_mode(card)
    }
    fn set_mig_mode(&self, card: &PciAddress, enabled: bool) -> Result<MigMode, VendorError> {
        self.inner.set_mig_mode(card, enabled)
    }
    fn mig_instances(&self, card: &PciAddress) -> Result<Vec<MigInstance>, VendorError> {
        self.inner.mig_instances(card)
    }
    fn create_mig_device(
        &self,
        card: &PciAddress,
        profile_id: u32,
        placement: MigPlacement,
    ) -> Result<MigInstance, VendorError> {
        self.wait_for_gate();
        self.inner.create_mig_device(card, profile_id, placement)
    }
    fn destroy_mig_device(&self, card: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError> {
        self.inner.destroy_mig_device(card, gpu_instance_id)
    }
    fn destroy_compute_instance(&self, card: &PciAddress, gi: u32, ci: u32) -> Result<(), VendorError> {
        self.inner.destroy_compute_instance(card, gi, ci)
    }
    fn destroy_gpu_instance(&self, card: &PciAddress, gi: u32) -> Result<(), VendorError> {
        self.inner.destroy_gpu_instance(card, gi)
    }
    fn running_processes(&self, card: &PciAddress) -> Result<Vec<GpuProcess>, VendorError> {
        self.inner.running_processes(card)
    }
    fn health_monitor(&self, cards: &[PciAddress]) -> Result<Box<dyn HealthMonitor>, VendorError> {
        self.inner.health_monitor(cards)
    }
    fn health_reading(&self, card: &PciAddress) -> Result<HealthReading, VendorError> {
        self.inner.health_reading(card)
    }
}

/// The node's preparer over [`HeldCreates`], giving up on a vendor call after 200 ms, and the gate.
fn held_preparer(node: &Node) -> (NodePreparer, Arc<(Mutex<bool>, Condvar)>) {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let backend = HeldCreates {
        inner: node.backend(),
        gate: gate.clone(),
    };
    let config = NodePrepareConfig {
        vendor_call_timeout: Duration::from_millis(200),
        ..node.preparer.config().clone()
    };
    (NodePreparer::new(config, Arc::new(backend)), gate)
}

fn open(gate: &(Mutex<bool>, Condvar)) {
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
}

/// Calls `attempt` until it succeeds, as the kubelet and the handler's upkeep retry; the last
/// failure when it never does within a minute.
fn until_ok<T>(what: &str, mut attempt: impl FnMut() -> Result<T, PrepareError>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(error) if Instant::now() > deadline => panic!("{what}: still failing: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs `pass` (reconciliation, the upkeep) until it has rolled back one claim: until then the
/// abandoned call may still be on its way out of the library.
fn until_rolled_back(what: &str, mut pass: impl FnMut() -> Result<ReconcileReport, PrepareError>) -> ReconcileReport {
    until_ok(what, || {
        let report = pass()?;
        match report.started_claims_rolled_back {
            1 => Ok(report),
            _ => Err(PrepareError::Refused {
                claim: "default/claim-uid-a".into(),
                reason: format!("not rolled back yet: {report:?}"),
            }),
        }
    })
}

/// Waits until the mock shows GPU instances starting at `starts`.
fn until_instances(node: &Node, starts: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while node.instance_starts() != starts {
        assert!(
            Instant::now() < deadline,
            "the mock shows instances at {:?}, not {starts:?}",
            node.instance_starts()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_claims_retry_waits_for_a_late_create_and_then_prepares_its_placement() {
    let node = Node::a30();
    // Another claim's instance keeps the card in MIG mode, so the late create can land.
    node.preparer.prepare(&mig_request("uid-other", &[2])).unwrap();
    let (preparer, gate) = held_preparer(&node);
    let request = mig_request("uid-a", &[0]);

    let error = preparer.prepare(&request).unwrap_err().to_string();
    assert!(error.contains("did not return within 200ms"), "{error}");
    // The kubelet retries while the abandoned call is still in the driver: the node waits for it
    // rather than making a second instance beside it.
    let retry = preparer.prepare(&request).unwrap_err().to_string();
    assert!(
        retry.contains("has not returned yet"),
        "a retry while the abandoned create runs: {retry}"
    );

    open(&gate);
    until_instances(&node, &[0, 2]);
    let prepared = until_ok("the claim's retry", || preparer.prepare(&request));
    assert_eq!(prepared[0].device_name, "gpu0-mig-2g12gb-0");
    assert_eq!(node.instance_starts(), [0, 2], "one instance at 0, the claim's");
    let claims = preparer.prepared_claims().unwrap();
    let claim = &claims["uid-a"];
    assert_eq!(claim.state, ClaimState::PrepareCompleted);
    let recorded = claim.devices[0].mig_instance.clone().expect("its instance is recorded");
    let gpu = node.mock_gpu();
    let at_zero = gpu.gpu_instances.iter().find(|gi| gi.placement.start == 0).unwrap();
    assert_eq!(at_zero.id, recorded.gpu_instance_id);
}

#[test]
fn a_late_instance_of_a_claim_never_retried_is_destroyed_at_the_next_start() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-other", &[0])).unwrap();
    let (preparer, gate) = held_preparer(&node);
    preparer.prepare(&mig_request("uid-a", &[2])).unwrap_err();
    open(&gate);
    until_instances(&node, &[0, 2]);

    // The claim was deleted meanwhile: the kubelet never asks again. The next start finds the
    // instance the claim's record says it attempted, and takes it away.
    let report = until_rolled_back("reconciliation", || node.restarted().reconcile());
    assert_eq!(report.foreign_mig_instances, Vec::<String>::new(), "{report:?}");
    assert_eq!(node.instance_starts(), [0], "the other claim's instance only");
    let claims = node.preparer.prepared_claims().unwrap();
    assert_eq!(claims.keys().collect::<Vec<_>>(), ["uid-other"]);
    // Its placement is free for the next claim.
    node.preparer.prepare(&mig_request("uid-b", &[2])).unwrap();
}

#[test]
fn a_late_instance_of_a_claim_never_retried_is_destroyed_by_the_nodes_upkeep() {
    let node = Node::a30();
    let (preparer, gate) = held_preparer(&node);
    preparer.prepare(&mig_request("uid-a", &[2])).unwrap_err();
    // While the call is in the driver the upkeep leaves the claim's record alone.
    let report = preparer.upkeep().unwrap();
    assert_eq!(report.started_claims_rolled_back, 0, "{report:?}");
    assert!(report.failures[0].contains("has not returned yet"), "{report:?}");
    open(&gate);

    // The handler's periodic upkeep, in the same process: no restart needed.
    until_rolled_back("the upkeep", || preparer.upkeep());
    assert_eq!(node.instance_starts(), Vec::<u32>::new());
    assert!(!node.mock_gpu().mig_current, "MIG mode given back");
    assert!(preparer.prepared_claims().unwrap().is_empty());
}
