//! The installation guide (docs/INSTALL.md and docs/INSTALL.ru.md) holds together as a newcomer follows
//! it: both languages give the same manifests and commands; the ModuleConfig `gpu` names the
//! ModuleSource and ModuleUpdatePolicy the guide creates and its settings are valid by the module's
//! own schema (openapi/config-values.yaml, checked by the real API server); the feature gates it turns
//! on are the ones the admin guide's table lists; experimental modules are allowed by a patch that
//! changes nothing else; and the versions it names are module.yaml's requirements.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};
use support::components::repo_root;
use testbed::{Progress, TestNamespace, wait_until};

/// What a guide shows: its YAML manifests and its shell commands, in order.
#[derive(Debug, PartialEq)]
struct Guide {
    manifests: Vec<Value>,
    commands: Vec<String>,
    text: String,
}

fn guide(file: &str) -> Guide {
    let text = std::fs::read_to_string(repo_root().join("docs").join(file)).unwrap();
    let (mut manifests, mut commands) = (Vec::new(), Vec::new());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(language) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.trim_start().starts_with("```"))
            .collect();
        match language {
            "yaml" => manifests
                .extend(serde_yaml::Deserializer::from_str(&block.join("\n")).map(|d| Value::deserialize(d).unwrap())),
            "shell" => commands.extend(block.iter().map(|l| l.trim().to_owned())),
            _ => {}
        }
    }
    Guide {
        manifests,
        commands,
        text,
    }
}

fn find<'a>(guide: &'a Guide, kind: &str, name: &str) -> &'a Value {
    guide
        .manifests
        .iter()
        .find(|m| m["kind"] == kind && m["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the guide has no {kind} {name}"))
}

#[test]
fn both_languages_show_the_same_steps_and_they_fit_together() {
    let en = guide("INSTALL.md");
    let ru = guide("INSTALL.ru.md");
    assert_eq!(
        en.manifests, ru.manifests,
        "INSTALL.md and INSTALL.ru.md differ in their manifests"
    );
    assert_eq!(
        en.commands, ru.commands,
        "INSTALL.md and INSTALL.ru.md differ in their commands"
    );

    let source = en
        .manifests
        .iter()
        .find(|m| m["kind"] == "ModuleSource")
        .expect("a ModuleSource");
    let policy = en
        .manifests
        .iter()
        .find(|m| m["kind"] == "ModuleUpdatePolicy")
        .expect("a ModuleUpdatePolicy");
    let config = find(&en, "ModuleConfig", "gpu");
    assert_eq!(config["spec"]["enabled"], true);
    assert_eq!(config["spec"]["source"], source["metadata"]["name"]);
    assert_eq!(config["spec"]["updatePolicy"], policy["metadata"]["name"]);
    assert_eq!(
        policy["apiVersion"], "deckhouse.io/v1alpha2",
        "ModuleConfig.spec.updatePolicy names a v1alpha2 policy"
    );
    let config_version = yaml_file("openapi/config-values.yaml")["x-config-version"]
        .as_i64()
        .unwrap_or(1);
    assert_eq!(config["spec"]["version"], config_version);
    let override_ = find(&en, "ModulePullOverride", "gpu");
    assert!(override_["spec"]["imageTag"].is_string());

    // Experimental: allowed by a merge patch of that one setting, not a ModuleConfig applied over the
    // cluster's own `deckhouse` settings.
    assert!(en.manifests.iter().all(|m| m["metadata"]["name"] != "deckhouse"));
    let patch = en
        .commands
        .iter()
        .find(|c| c.starts_with("d8 k patch moduleconfig deckhouse --type merge -p '"))
        .expect("the patch allowing experimental modules");
    let body: Value = serde_json::from_str(patch.split('\'').nth(1).unwrap()).unwrap();
    assert_eq!(body, json!({"spec": {"settings": {"allowExperimentalModules": true}}}));
    let module = yaml_file("module.yaml");
    assert_eq!(module["stage"], "Experimental");

    // The versions: module.yaml's requirements, as written there.
    for requirement in ["deckhouse", "kubernetes"] {
        let wanted = module["requirements"][requirement].as_str().unwrap();
        for guide in [&en, &ru] {
            assert!(
                guide
                    .text
                    .contains(&format!("requirements.{requirement}: \"{wanted}\"")),
                "the guide does not state requirements.{requirement} {wanted}"
            );
        }
    }

    // The gates it turns on are the admin guide's, each one.
    let gates: Vec<&str> =
        find(&en, "ModuleConfig", "control-plane-manager")["spec"]["settings"]["enabledFeatureGates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap())
            .collect();
    let admin_guide = std::fs::read_to_string(repo_root().join("docs/ADMIN_GUIDE.md")).unwrap();
    let table: Vec<&str> = admin_guide
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .filter(|name| name.starts_with("DRA") || *name == "ResourceHealthStatus")
        .collect();
    assert_eq!(gates, table);
}

fn yaml_file(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(repo_root().join(path)).unwrap()).unwrap()
}

/// The ModuleConfig's settings as Deckhouse checks them, by the module's config schema: here the real
/// API server checks them, as a custom resource whose schema is openapi/config-values.yaml (strict field
/// validation, so an unknown setting is an error as in Deckhouse).
#[tokio::test]
async fn the_guides_module_settings_are_valid_by_the_modules_schema() {
    let ns = TestNamespace::create("install-docs").await.unwrap();
    let client = ns.client();
    let settings = find(&guide("INSTALL.md"), "ModuleConfig", "gpu")["spec"]["settings"].clone();
    let mut schema = yaml_file("openapi/config-values.yaml");
    strip_extensions(&mut schema);
    let group = format!("{}.install-docs.test", ns.name());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("gpusettings.{group}"), "labels": ns.owner_labels()},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "gpusettings", "singular": "gpusettings", "kind": "GpuSettings"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object",
                     "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                    "metadata": {"type": "object"}, "settings": schema}}}}]}}))
    .unwrap();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let resource = kube::discovery::ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "GpuSettings".into(),
        plural: "gpusettings".into(),
    };
    let api = Api::<kube::api::DynamicObject>::all_with(client, &resource);
    let object = |settings: &Value| -> kube::api::DynamicObject {
        serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "GpuSettings",
                                      "metadata": {"name": "from-the-guide"}, "settings": settings}))
        .unwrap()
    };
    let strict = PatchParams::apply("install-docs").dry_run().validation_strict();
    let answer = wait_until(
        "the settings schema is served",
        std::time::Duration::from_secs(30),
        || {
            let (api, strict, object) = (api.clone(), strict.clone(), object(&settings));
            async move {
                Ok(
                    match api.patch("from-the-guide", &strict, &Patch::Apply(&object)).await {
                        Err(kube::Error::Api(status)) if status.code == 404 => {
                            Progress::Pending("not served yet".into())
                        }
                        other => Progress::Done(other.map(|_| ()).map_err(|e| e.to_string())),
                    },
                )
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(answer, Ok(()), "the guide's settings {settings}");
    // The check can fail: a setting the schema does not have is refused.
    let wrong = api
        .patch(
            "from-the-guide",
            &strict,
            &Patch::Apply(&object(&json!({"nodeSelectr": {}}))),
        )
        .await;
    assert!(wrong.is_err(), "an unknown setting passed");
    crds.delete(&crd.metadata.name.unwrap(), &DeleteParams::default())
        .await
        .unwrap();
}

/// Drops the `x-` extensions of an OpenAPI schema (Deckhouse's x-examples and the like), which a CRD's
/// schema does not allow.
fn strip_extensions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|key, _| !key.starts_with("x-"));
            map.values_mut().for_each(strip_extensions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_extensions),
        _ => {}
    }
}
