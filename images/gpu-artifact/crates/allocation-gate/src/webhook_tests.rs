use std::sync::{Arc, Mutex};

use kube::client::Body;
use kube::runtime::watcher::Event;
use serde_json::json;
use tokio::sync::watch;

use super::*;

const CLAIMS: usize = 8;

/// One read in flight; a read the client gives up on (dropped at its timeout) counts no more.
struct InFlight(watch::Sender<usize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A stand-in API server that answers template reads only once [`CLAIMS`] reads were in flight
/// together, and records the most it saw at once. Read one after another, the first would
/// wait past the lookup timeout, and every other one too.
fn api_answering_only_parallel_reads(most_at_once: Arc<Mutex<usize>>) -> Client {
    let (in_flight, _) = watch::channel(0usize);
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let (in_flight, most_at_once) = (in_flight.clone(), most_at_once.clone());
        async move {
            in_flight.send_modify(|n| *n += 1);
            let _leaves = InFlight(in_flight.clone());
            let now = *in_flight.borrow();
            {
                let mut most = most_at_once.lock().unwrap();
                *most = (*most).max(now);
            }
            let mut all_in = in_flight.subscribe();
            loop {
                all_in.borrow_and_update();
                if *most_at_once.lock().unwrap() >= CLAIMS {
                    break;
                }
                all_in.changed().await.unwrap();
            }
            let name = request.uri().path().rsplit('/').next().unwrap().to_owned();
            let class = if name == "t7" { "gpu" } else { "nic" };
            let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": "team"},
                "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class}}]}}}});
            let body = Body::from(serde_json::to_vec(&template).unwrap());
            Ok::<_, std::convert::Infallible>(http::Response::new(body))
        }
    });
    Client::new(service, "default")
}

fn gate_classes() -> Store<DeviceClass> {
    let (store, mut writer) = reflector::store();
    let class: DeviceClass = serde_json::from_value(json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.deckhouse.io\""}}]}}))
    .unwrap();
    writer.apply_watcher_event(&Event::Apply(class));
    store
}

#[tokio::test]
async fn the_claims_of_a_pod_are_looked_up_at_once() {
    let most_at_once = Arc::new(Mutex::new(0));
    let admission = Admission {
        client: api_answering_only_parallel_reads(most_at_once.clone()),
        classes: gate_classes(),
    };
    let claims: Vec<_> = (0..CLAIMS)
        .map(|i| json!({"name": format!("c{i}"), "resourceClaimTemplateName": format!("t{i}")}))
        .collect();
    let review: AdmissionReview<Pod> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "team",
            "operation": "CREATE", "userInfo": {}, "name": "p",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"},
                "spec": {"containers": [{"name": "c"}], "resourceClaims": claims}}}}))
    .unwrap();
    let request: AdmissionRequest<Pod> = review.try_into().unwrap();
    let response = respond(&admission, &request).await;
    assert_eq!(
        *most_at_once.lock().unwrap(),
        CLAIMS,
        "the Pod's {CLAIMS} templates are read at the same time"
    );
    assert!(
        response.patch.is_some(),
        "the last template's class gates the Pod: {response:?}"
    );
}
