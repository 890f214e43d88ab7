//! The roles a Deckhouse user gets on the module (templates/user-authz-cluster-roles.yaml and
//! templates/rbacv2) as the real API server grants them: the chart's ClusterRoles applied as rendered,
//! the rbacv2 roles filled by kube-controller-manager's aggregation, a ServiceAccount bound to each one
//! alone (user-authz and `manage` roles cluster-wide, `use` roles in one namespace, as Deckhouse binds
//! them), and the real authorizer asked about every verb on the module's kinds, the DRA claims and the
//! ModuleConfig: each role allows exactly what it names. Two of them then act for real.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use gpu_api::GPUClass;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::components::install_crds;
use support::gpu_classes::class_object;
use support::rendered_rbac::{of_kind, render_chart};
use support::user_roles::{Ask, Scope, every_ask, expected};
use testbed::{Access, Progress, TestNamespace, wait_until};

/// The chart's ClusterRoles for users: user-authz's and rbacv2's.
fn user_roles() -> Vec<Value> {
    let objects = render_chart(&["driver-ready"]);
    of_kind(&objects, "ClusterRole")
        .filter(|role| {
            let name = role["metadata"]["name"].as_str().unwrap();
            ["d8:user-authz:gpu:", "d8:use:", "d8:manage:"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .cloned()
        .collect()
}

/// The roles a user is bound to (not the capabilities they aggregate), and whether Deckhouse binds
/// them in a namespace (`use`) rather than cluster-wide.
fn bound_roles(roles: &[Value]) -> Vec<(String, bool)> {
    roles
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
        .filter(|name| {
            name.starts_with("d8:user-authz:") || name.starts_with("d8:use:role:") || name.starts_with("d8:manage:gpu:")
        })
        .map(|name| {
            let namespaced = name.starts_with("d8:use:");
            (name, namespaced)
        })
        .collect()
}

#[tokio::test]
async fn each_user_role_allows_exactly_what_it_names() {
    let ns = TestNamespace::create("module-user-roles").await.unwrap();
    let other = TestNamespace::create("module-user-roles-other").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;

    // The chart's roles, applied as rendered (labelled for the test's cleanup).
    let roles = user_roles();
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    for role in &roles {
        let mut role = role.clone();
        let labels = role["metadata"]["labels"].as_object_mut().unwrap();
        for (key, value) in ns.owner_labels() {
            labels.insert(key, json!(value));
        }
        let name = role["metadata"]["name"].as_str().unwrap().to_owned();
        cluster_roles
            .patch(
                &name,
                &PatchParams::apply("module-user-roles").force(),
                &Patch::Apply(&role),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // kube-controller-manager fills every aggregated role (rbacv2's chain: viewer < user < manager <
    // admin) from the roles it selects.
    let aggregated: Vec<String> = roles
        .iter()
        .filter(|r| r.get("aggregationRule").is_some())
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(aggregated.len(), 6, "{aggregated:?}");
    wait_until("every aggregated role is filled", Duration::from_secs(60), || {
        let cluster_roles = cluster_roles.clone();
        let aggregated = aggregated.clone();
        async move {
            let mut empty = Vec::new();
            for name in &aggregated {
                if cluster_roles.get(name).await?.rules.unwrap_or_default().is_empty() {
                    empty.push(name.clone());
                }
            }
            Ok(if empty.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(format!("still empty: {empty:?}"))
            })
        }
    })
    .await
    .unwrap();

    let bound = bound_roles(&roles);
    assert_eq!(bound.len(), 10, "{bound:?}");
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    for (index, (role, namespaced)) in bound.iter().enumerate() {
        let account = format!("user-{index}");
        bind(&ns, &account, role, *namespaced).await;
        let user = format!("system:serviceaccount:{}:{account}", ns.name());
        let expected = expected(role);
        // RBAC is served from the authorizer's cache: wait until the binding shows, then ask everything.
        let probe = expected.iter().next().cloned().expect("every role allows something");
        wait_until(&format!("{role} is in force"), Duration::from_secs(30), || {
            let (reviews, user, probe) = (reviews.clone(), user.clone(), probe.clone());
            let (ns, other) = (ns.name().to_owned(), other.name().to_owned());
            async move {
                Ok(if allowed(&reviews, &user, &probe, &ns, &other).await? {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{probe:?} not allowed yet"))
                })
            }
        })
        .await
        .unwrap();
        let mut granted = BTreeSet::new();
        for ask in every_ask() {
            if allowed(&reviews, &user, &ask, ns.name(), other.name()).await.unwrap() {
                granted.insert(ask);
            }
        }
        let extra: Vec<&Ask> = granted.difference(&expected).collect();
        let missing: Vec<&Ask> = expected.difference(&granted).collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "{role}: allows more than it names {extra:#?}\nand not what it names {missing:#?}"
        );
    }

    // For real: a User lists GPUClasses and cannot create one; a ClusterEditor creates one.
    let reader = ns.client_as("reader", Access::Cluster(vec![])).await.unwrap();
    bind(&ns, "reader", "d8:user-authz:gpu:user", false).await;
    let editor = ns.client_as("editor", Access::Cluster(vec![])).await.unwrap();
    bind(&ns, "editor", "d8:user-authz:gpu:cluster-editor", false).await;
    let class = class_object(
        &ns,
        "by-cluster-editor",
        json!({"vendor": "Nvidia", "deviceType": "Physical"}),
    );
    wait_until("the User lists GPUClasses", Duration::from_secs(30), || {
        let reader = reader.clone();
        async move {
            Ok(match Api::<GPUClass>::all(reader).list(&Default::default()).await {
                Ok(_) => Progress::Done(()),
                Err(e) => Progress::Pending(e.to_string()),
            })
        }
    })
    .await
    .unwrap();
    match Api::<GPUClass>::all(reader)
        .create(&PostParams::default(), &class)
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("a User creating a GPUClass: expected 403, got {other:?}"),
    }
    wait_until("the ClusterEditor creates a GPUClass", Duration::from_secs(30), || {
        let (editor, class) = (editor.clone(), class.clone());
        async move {
            Ok(
                match Api::<GPUClass>::all(editor)
                    .create(&PostParams::default(), &class)
                    .await
                {
                    Ok(created) => Progress::Done(created),
                    Err(e) => Progress::Pending(e.to_string()),
                },
            )
        }
    })
    .await
    .unwrap();
    assert!(
        Api::<GPUClass>::all(client)
            .get_opt(&ns.unique("by-cluster-editor"))
            .await
            .unwrap()
            .is_some()
    );
}

/// Binds ServiceAccount `account` of `ns` to ClusterRole `role`: in `ns` (a RoleBinding, as rbacv2's
/// `use` roles are bound) or cluster-wide (labelled for the test's cleanup).
async fn bind(ns: &TestNamespace, account: &str, role: &str, namespaced: bool) {
    let client = ns.client();
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), ns.name());
    if accounts.get_opt(account).await.unwrap().is_none() {
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": account}})).unwrap();
        accounts.create(&PostParams::default(), &sa).await.unwrap();
    }
    let name = ns.unique(&format!("{account}-module-role"));
    let binding = json!({
        "metadata": {"name": name, "labels": ns.owner_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns.name()}],
    });
    if namespaced {
        let binding: RoleBinding = serde_json::from_value(binding).unwrap();
        Api::namespaced(client, ns.name())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    } else {
        let binding: ClusterRoleBinding = serde_json::from_value(binding).unwrap();
        Api::all(client).create(&PostParams::default(), &binding).await.unwrap();
    }
}

/// The real authorizer's answer to `ask` for `user` (a SubjectAccessReview).
async fn allowed(
    reviews: &Api<SubjectAccessReview>,
    user: &str,
    ask: &Ask,
    ns: &str,
    other: &str,
) -> kube::Result<bool> {
    let namespace = match ask.scope {
        Scope::Cluster => None,
        Scope::TestNamespace => Some(ns.to_owned()),
        Scope::OtherNamespace => Some(other.to_owned()),
    };
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:serviceaccounts".into(), "system:authenticated".into()]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(ask.verb.to_owned()),
                group: Some(ask.group.to_owned()),
                resource: Some(ask.resource.to_owned()),
                subresource: some(ask.subresource),
                name: some(ask.name),
                namespace,
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
