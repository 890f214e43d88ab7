//! gpu-handler's one Pod on the real node: waiting until it is back after an event (its container
//! restarted, its Pod deleted, a new image), and the clock the tests compare Pod output with.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::{Api, Client};
use real_node::module_status::{MODULE_NAMESPACE, describe, module_pods, wait_module_ready};
use testbed::{Progress, wait_until};

/// Seconds since the epoch, as `date +%s` prints them in a Pod.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The one gpu-handler Pod.
pub async fn handler_pod(client: &Client) -> Pod {
    module_pods(client, "gpu-handler").await.remove(0)
}

/// Waits until a gpu-handler Pod that is not being deleted satisfies `done` (`what` it is), then
/// until the module is ready again (Ready = registered with the kubelet again, its readiness gate).
pub async fn handler_back(client: &Client, what: &str, done: impl Fn(&Pod) -> bool) {
    wait_until(what, Duration::from_secs(180), || async {
        let pods = module_pods(client, "gpu-handler").await;
        Ok(
            match pods.iter().find(|p| p.metadata.deletion_timestamp.is_none() && done(p)) {
                Some(_) => Progress::Done(()),
                None => Progress::Pending(pods.iter().map(describe).collect::<Vec<_>>().join("; ")),
            },
        )
    })
    .await
    .unwrap();
    wait_module_ready(client).await.unwrap();
}

/// Deletes gpu-handler's Pod and waits until the DaemonSet's next one is ready; returns when the
/// deletion was asked for (`now()`).
pub async fn delete_handler_pod(client: &Client) -> u64 {
    let old = handler_pod(client).await;
    let old_uid = old.metadata.uid.clone().unwrap();
    Api::<Pod>::namespaced(client.clone(), MODULE_NAMESPACE)
        .delete(old.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await
        .unwrap();
    let deleted_at = now();
    handler_back(client, "a new gpu-handler Pod", |p| {
        p.metadata.uid.as_deref() != Some(old_uid.as_str())
    })
    .await;
    deleted_at
}
