//! The module's ValidatingAdmissionPolicies as `helm` renders them, installed for a test
//! namespace's accounts, and a wait until the API server enforces one.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use kube::Api;
use serde_json::{Value, json};
use testbed::{Progress, TestNamespace, wait_until};

use super::create;
use super::rendered_rbac::{MODULE_NAMESPACE, of_kind, render_chart};

/// The chart's ValidatingAdmissionPolicies and bindings whose names contain `named`, as `helm`
/// renders them for the DriverReady fixture, installed for this namespace's accounts of the same
/// names (under unique names); returns how many distinct names there were (a binding is named as
/// its policy).
pub async fn install_rendered_policies(ns: &TestNamespace, named: &str) -> usize {
    let objects = render_chart(&["driver-ready"]);
    let module_accounts = format!("system:serviceaccount:{MODULE_NAMESPACE}:");
    let test_accounts = format!("system:serviceaccount:{}:", ns.name());
    let mut names = BTreeMap::new();
    for kind in ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] {
        for object in
            of_kind(&objects, kind).filter(|o| o["metadata"]["name"].as_str().is_some_and(|n| n.contains(named)))
        {
            let text = object.to_string().replace(&module_accounts, &test_accounts);
            let mut object: Value = serde_json::from_str(&text).unwrap();
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            let unique = names.entry(name.clone()).or_insert_with(|| ns.unique(&name)).clone();
            object["metadata"]["name"] = json!(unique);
            object["metadata"]["labels"] = json!(ns.owner_labels());
            if kind == "ValidatingAdmissionPolicyBinding" {
                let policy = object["spec"]["policyName"].as_str().unwrap().to_owned();
                object["spec"]["policyName"] = json!(
                    names
                        .entry(policy.clone())
                        .or_insert_with(|| ns.unique(&policy))
                        .clone()
                );
                let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(object).unwrap();
                create(&Api::all(ns.client()), &binding).await;
            } else {
                let policy: ValidatingAdmissionPolicy = serde_json::from_value(object).unwrap();
                create(&Api::all(ns.client()), &policy).await;
            }
        }
    }
    names.len()
}

/// Waits until `attempt` (a write a policy refuses, undone when it got through) is refused with
/// `says`: a policy is enforced only once the API server has loaded it and its binding.
pub async fn until_refused<F, Fut>(what: &str, says: &str, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    wait_until(&format!("{what} in force"), Duration::from_secs(30), || {
        let tried = attempt();
        async move {
            Ok(match tried.await {
                Err(kube::Error::Api(status)) if status.message.contains(says) => Progress::Done(()),
                Ok(()) => Progress::Pending("the write went through".into()),
                Err(other) => Progress::Pending(format!("{other}")),
            })
        }
    })
    .await
    .unwrap();
}

/// Asserts that `result` is the API server's refusal (403 or 422) with a message containing `says`.
pub fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str, says: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 || status.code == 403 => {
            assert!(status.message.contains(says), "{what}: {}", status.message)
        }
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}
