//! Whether a gated Pod's CPU, memory and Pod count fit a node, as the kube-scheduler's
//! NodeResourcesFit filter decides (`fitsRequest`, `pkg/scheduler/framework/plugins/noderesources/
//! fit.go`, v1.34.4): the node's allocatable less what the Pods bound there request, the Pod's
//! requests computed as `PodRequests` computes them (`k8s.io/component-helpers/resource/helpers.go`):
//! the containers' sum and the restartable init containers (sidecars), at least each init
//! container's use (itself plus the sidecars started before it), pod-level requests in place of
//! the containers' where set (PodLevelResources, beta and on in 1.34), plus the Pod's overhead.
//! A claim pinned to a node where the Pod does not fit would leave the Pod Pending there for good.
//!
//! Pure. What the scheduler counts on a node is the non-terminal Pods with a node name (its Pod
//! informer lists with `status.phase!=Succeeded,status.phase!=Failed`, `scheduler.go`). Requests
//! of Pods resized in place are read from their spec, not from their containers' status.

use std::collections::HashMap;
use std::sync::Arc;

use crate::lean_pod::LeanPod;

use dra_cel::Quantity;
use k8s_openapi::api::core::v1::{Container, Node, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

/// What NodeResourcesFit compares of a Pod and a node, CPU in millicores, memory in bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    pub milli_cpu: i128,
    pub memory: i128,
}

impl Requests {
    fn add(&mut self, other: Requests) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
    }

    fn max(&mut self, other: Requests) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
    }

    /// CPU rounded up to millicores, memory up to bytes, as Go's `MilliValue` and `Value` round.
    fn of(list: Option<&std::collections::BTreeMap<String, ApiQuantity>>) -> (Option<i128>, Option<i128>) {
        let read = |name: &str, unit: &str| {
            let quantity = Quantity::parse(&list?.get(name)?.0).ok()?;
            quantity.div_ceil(Quantity::parse(unit).expect("a unit parses"))
        };
        (read("cpu", "1m"), read("memory", "1"))
    }

    fn of_container(container: &Container) -> Requests {
        let (milli_cpu, memory) = Self::of(container.resources.as_ref().and_then(|r| r.requests.as_ref()));
        Requests {
            milli_cpu: milli_cpu.unwrap_or(0),
            memory: memory.unwrap_or(0),
        }
    }
}

/// The Pod's requests as `PodRequests` (with overhead, pod-level requests honoured) computes them.
pub fn pod_requests(spec: &PodSpec) -> Requests {
    let mut total = Requests::default();
    for container in &spec.containers {
        total.add(Requests::of_container(container));
    }
    let (mut sidecars, mut init_use) = (Requests::default(), Requests::default());
    for container in spec.init_containers.iter().flatten() {
        let requests = Requests::of_container(container);
        if container.restart_policy.as_deref() == Some("Always") {
            total.add(requests);
            sidecars.add(requests);
            init_use.max(sidecars);
        } else {
            let mut during = requests;
            during.add(sidecars);
            init_use.max(during);
        }
    }
    total.max(init_use);
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    let (cpu, memory) = Requests::of(pod_level);
    total.milli_cpu = cpu.unwrap_or(total.milli_cpu);
    total.memory = memory.unwrap_or(total.memory);
    let (cpu, memory) = Requests::of(spec.overhead.as_ref());
    total.add(Requests {
        milli_cpu: cpu.unwrap_or(0),
        memory: memory.unwrap_or(0),
    });
    total
}

/// What is taken on one node: the requests of the Pods there, and how many there are.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub requests: Requests,
    pub pods: i64,
}

impl Taken {
    /// Counts one more Pod with these requests.
    pub fn count(&mut self, requests: Requests) {
        self.requests.add(requests);
        self.pods += 1;
    }
}

/// What is taken on each node, by the Pods bound there and not terminated.
pub fn taken_by_bound_pods(pods: &[Arc<LeanPod>]) -> HashMap<String, Taken> {
    let mut taken: HashMap<String, Taken> = HashMap::new();
    for pod in pods {
        let Some(node) = pod.node_name.as_ref() else { continue };
        if pod.terminated {
            continue;
        }
        taken.entry(node.clone()).or_default().count(pod.requests);
    }
    taken
}

/// Whether a Pod requesting `pod` fits `node` with `taken` already there: NodeResourcesFit's
/// Pod-count, CPU and memory checks (a zero request is not checked; a resource the allocatable
/// leaves out is 0, as the scheduler reads it). A node that reports no allocatable at all (no
/// kubelet has posted its status yet) is not judged here: the scheduler waits for it anyway.
pub fn fits(pod: Requests, node: &Node, taken: Taken) -> bool {
    let Some(allocatable) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) else {
        return true;
    };
    let (cpu, memory) = Requests::of(Some(allocatable));
    let pods = allocatable
        .get("pods")
        .and_then(|q| Quantity::parse(&q.0).ok())
        .and_then(|q| q.as_integer())
        .unwrap_or(0);
    let room =
        |wanted: i128, allocatable: Option<i128>, used: i128| wanted == 0 || wanted <= allocatable.unwrap_or(0) - used;
    taken.pods < pods
        && room(pod.milli_cpu, cpu, taken.requests.milli_cpu)
        && room(pod.memory, memory, taken.requests.memory)
}

#[cfg(test)]
#[path = "node_fit_tests.rs"]
mod tests;
