//! When a gated Pod began to wait for gpu-dra-controller: the moment our gate became its last
//! scheduling gate. Before that another actor holds the Pod (Kueue's `kueue.x-k8s.io/admission`
//! until its queue admits it) and gpu-dra-controller does not allocate it, so the lifter's bound
//! must not run. A Pod's object does not say when a gate was removed, so the clock is the lifter's
//! own: a wait starts at the first look that sees our gate as the Pod's last one. It may start up
//! to one period late (and, after gpu-controller restarts, one bound late), never early. Pure.

use std::collections::HashMap;
use std::time::Duration;

use claim_allocation::selection::gate_is_last;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// How many times the bound a Pod nominated by gpu-dra-controller's preemption waits
/// (`status.nominatedNodeName`): its victims are going, each within its termination grace period
/// (30 s by default, often more), and lifting the gate sooner hands the freed devices to the
/// scheduler's first fit, where any Pod may take them. Ten minutes with the default bound.
pub const NOMINATED_FACTOR: u32 = 20;

/// The waits of the gated Pods, by uid.
#[derive(Debug, Default)]
pub struct GateClock {
    since: HashMap<String, Timestamp>,
}

impl GateClock {
    /// Looks at the Pods listed at `now`: starts the wait of each whose last gate has become ours,
    /// forgets the others, and returns how long each Pod (by its index in `pods`) has waited, for
    /// those that waited at least `after` ([`NOMINATED_FACTOR`] times that for a nominated Pod).
    /// Pods being deleted never wait.
    pub fn look(&mut self, pods: &[Pod], now: Timestamp, after: Duration) -> Vec<(usize, Duration)> {
        let mut seen = HashMap::with_capacity(pods.len());
        let mut overdue = vec![];
        for (index, pod) in pods.iter().enumerate() {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() || !gate_is_last(pod) {
                continue;
            }
            let since = *self.since.get(&uid).unwrap_or(&now);
            seen.insert(uid, since);
            let waited = Duration::try_from(now.duration_since(since)).unwrap_or_default();
            if waited >= bound(pod, after) {
                overdue.push((index, waited));
            }
        }
        self.since = seen;
        overdue
    }
}

/// How long `pod` may wait: longer while a preemption is under way for it.
pub(crate) fn bound(pod: &Pod, after: Duration) -> Duration {
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|node| !node.is_empty());
    if nominated {
        after.saturating_mul(NOMINATED_FACTOR)
    } else {
        after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const AFTER: Duration = Duration::from_secs(30);

    use claim_allocation::selection::SCHEDULING_GATE;

    fn pod(uid: &str, gates: &[&str]) -> Pod {
        let gates: Vec<_> = gates.iter().map(|g| json!({"name": g})).collect();
        serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}], "schedulingGates": gates}}))
        .unwrap()
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap()
    }

    #[test]
    fn a_wait_starts_when_our_gate_is_the_last_one_not_at_creation() {
        let mut clock = GateClock::default();
        let queued = [pod("q", &["kueue.x-k8s.io/admission", SCHEDULING_GATE])];
        assert!(clock.look(&queued, at(0), AFTER).is_empty());
        assert!(
            clock.look(&queued, at(600), AFTER).is_empty(),
            "held by the queue for ten minutes: not waiting for us"
        );
        let admitted = [pod("q", &[SCHEDULING_GATE])];
        assert!(clock.look(&admitted, at(605), AFTER).is_empty(), "our turn begins");
        assert!(clock.look(&admitted, at(630), AFTER).is_empty(), "25 s");
        assert_eq!(clock.look(&admitted, at(635), AFTER), [(0, Duration::from_secs(30))]);
    }

    #[test]
    fn pods_that_left_or_are_deleted_are_forgotten() {
        let mut clock = GateClock::default();
        assert!(clock.look(&[pod("a", &[SCHEDULING_GATE])], at(0), AFTER).is_empty());
        assert!(clock.look(&[], at(10), AFTER).is_empty());
        assert!(
            clock.look(&[pod("a", &[SCHEDULING_GATE])], at(40), AFTER).is_empty(),
            "a Pod seen again starts over"
        );
        let mut deleting = pod("a", &[SCHEDULING_GATE]);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(70)));
        assert!(clock.look(&[deleting], at(80), AFTER).is_empty());
        assert!(clock.since.is_empty());
    }

    #[test]
    fn a_pod_without_our_gate_never_waits() {
        let mut clock = GateClock::default();
        let others = [pod("o", &["example.com/quota"]), pod("n", &[])];
        assert!(clock.look(&others, at(0), AFTER).is_empty());
        assert!(clock.look(&others, at(100), AFTER).is_empty());
        assert!(clock.since.is_empty());
    }

    #[test]
    fn a_preemptor_waits_for_its_victims_longer() {
        let mut clock = GateClock::default();
        let mut nominated = pod("p", &[SCHEDULING_GATE]);
        nominated.status = Some(k8s_openapi::api::core::v1::PodStatus {
            nominated_node_name: Some("w1".into()),
            ..Default::default()
        });
        let pods = [nominated, pod("other", &[SCHEDULING_GATE])];
        assert!(clock.look(&pods, at(0), AFTER).is_empty());
        assert_eq!(
            clock.look(&pods, at(30), AFTER),
            [(1, Duration::from_secs(30))],
            "only the Pod that is not nominated is overdue"
        );
        assert!(clock.look(&pods[..1], at(599), AFTER).is_empty());
        assert_eq!(clock.look(&pods[..1], at(600), AFTER), [(0, Duration::from_secs(600))]);
    }
}
