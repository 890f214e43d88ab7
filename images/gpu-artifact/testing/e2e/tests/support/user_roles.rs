//! What the module's user roles name (templates/user-authz-cluster-roles.yaml, templates/rbacv2): the
//! questions module_user_roles asks the real authorizer about each role, and the answers each role
//! must give, written from the roles' documentation (docs/ADMIN_GUIDE.md, "Access for users").

use std::collections::BTreeSet;

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// One question to the authorizer: `verb group/resource[/subresource][:name]`, in the test's
/// namespace, in another namespace, or cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ask {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub name: &'static str,
    pub scope: Scope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Cluster,
    TestNamespace,
    OtherNamespace,
}

fn asks(verbs: &[&'static str], group: &'static str, resource: &'static str, scope: Scope) -> Vec<Ask> {
    verbs
        .iter()
        .map(|verb| Ask {
            verb,
            group,
            resource,
            subresource: "",
            name: "",
            scope,
        })
        .collect()
}

fn named(verbs: &[&'static str], group: &'static str, resource: &'static str, name: &'static str) -> Vec<Ask> {
    asks(verbs, group, resource, Scope::Cluster)
        .into_iter()
        .map(|ask| Ask { name, ..ask })
        .collect()
}

/// Every question asked of every role.
pub fn every_ask() -> Vec<Ask> {
    let all: Vec<&'static str> = READ.iter().chain(WRITE.iter()).copied().collect();
    let mut every = Vec::new();
    for resource in ["gpuclasses", "physicalgpus"] {
        every.extend(asks(&all, "gpu.deckhouse.io", resource, Scope::Cluster));
    }
    // Only the module's components write a PhysicalGPU's status.
    every.extend(
        asks(&["update", "patch"], "gpu.deckhouse.io", "physicalgpus", Scope::Cluster)
            .into_iter()
            .map(|ask| Ask {
                subresource: "status",
                ..ask
            }),
    );
    for resource in ["resourceclaims", "resourceclaimtemplates"] {
        for scope in [Scope::TestNamespace, Scope::OtherNamespace] {
            every.extend(asks(&all, "resource.k8s.io", resource, scope));
        }
    }
    every.extend(named(
        &["get", "update", "patch", "delete"],
        "deckhouse.io",
        "moduleconfigs",
        "gpu",
    ));
    // Another module's ModuleConfig is never the module's to give.
    every.extend(named(&["get", "update"], "deckhouse.io", "moduleconfigs", "deckhouse"));
    every
}

/// What each role names, as the asks it allows.
pub fn expected(role: &str) -> BTreeSet<Ask> {
    let claims = |verbs: &[&'static str], scopes: &[Scope]| -> Vec<Ask> {
        let mut out = Vec::new();
        for resource in ["resourceclaims", "resourceclaimtemplates"] {
            for scope in scopes {
                out.extend(asks(verbs, "resource.k8s.io", resource, *scope));
            }
        }
        out
    };
    let everywhere = [Scope::TestNamespace, Scope::OtherNamespace];
    let gpus = |verbs: &[&'static str], resource| asks(verbs, "gpu.deckhouse.io", resource, Scope::Cluster);
    let module_config = |verbs: &[&'static str]| named(verbs, "deckhouse.io", "moduleconfigs", "gpu");
    let allowed: Vec<Ask> = match role {
        "d8:user-authz:gpu:user" => [
            gpus(&READ, "gpuclasses"),
            gpus(&READ, "physicalgpus"),
            claims(&READ, &everywhere),
        ]
        .concat(),
        "d8:user-authz:gpu:editor" => claims(&WRITE, &everywhere),
        "d8:user-authz:gpu:cluster-editor" => gpus(&WRITE, "gpuclasses"),
        "d8:user-authz:gpu:cluster-admin" => gpus(&["update", "patch"], "physicalgpus"),
        "d8:use:role:viewer:gpu" | "d8:use:role:user:gpu" => claims(&READ, &[Scope::TestNamespace]),
        "d8:use:role:manager:gpu" | "d8:use:role:admin:gpu" => [
            claims(&READ, &[Scope::TestNamespace]),
            claims(&WRITE, &[Scope::TestNamespace]),
        ]
        .concat(),
        "d8:manage:gpu:viewer" => [
            gpus(&READ, "gpuclasses"),
            gpus(&READ, "physicalgpus"),
            module_config(&["get"]),
        ]
        .concat(),
        "d8:manage:gpu:manager" => [
            gpus(&READ, "gpuclasses"),
            gpus(&WRITE, "gpuclasses"),
            gpus(&READ, "physicalgpus"),
            gpus(&["update", "patch"], "physicalgpus"),
            module_config(&["get", "update", "patch", "delete"]),
        ]
        .concat(),
        other => panic!("no expectation for role {other}"),
    };
    allowed.into_iter().collect()
}
