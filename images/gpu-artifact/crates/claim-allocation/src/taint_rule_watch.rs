//! Watches an admin's DeviceTaintRules into the engine, in the version the API server serves:
//! `resource.k8s.io/v1` (1.37, GA), else `v1beta2` (1.36), else `v1alpha3` (1.34, behind
//! `DRADeviceTaints` and the `resource.k8s.io/v1alpha3` runtime config). The kube-scheduler reads the same rules through
//! its ResourceSlice tracker; without them gated Pods would bypass an admin's maintenance taint.
//! When neither version is served, the controller runs without rules and says so once.

use anyhow::Context;
use dra_allocator::TaintRule;
use futures::StreamExt;
use k8s_openapi::api::resource::v1alpha3::{DeviceTaintRule, DeviceTaintRuleSpec};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client};
use tokio::sync::{Notify, watch as tokio_watch};

use crate::engine_feed::EngineFeed;
use crate::engine_thread::EngineThread;

const GROUP: &str = "resource.k8s.io";
const KIND: &str = "DeviceTaintRule";

/// The served versions we read, preferred first. v1beta2 (1.36) has v1's selector fields;
/// v1alpha3 is read with 1.34's rules (see `dra_allocator::TaintRule::from_v1alpha3`).
const VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1alpha3"];

/// The rule in `object`, read as the scheduler of its version reads it (see
/// `dra_allocator::TaintRule`); `None` if it does not decode.
pub fn taint_rule_of(object: &DynamicObject, version: &str) -> Option<TaintRule> {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    if version == "v1alpha3" {
        let value = serde_json::to_value(object).ok()?;
        let rule: DeviceTaintRule = serde_json::from_value(value).ok()?;
        return Some(TaintRule::from_v1alpha3(&rule));
    }
    let spec: DeviceTaintRuleSpec = serde_json::from_value(object.data.get("spec")?.clone()).ok()?;
    Some(TaintRule::from_v1(name, &spec))
}

/// Which DeviceTaintRule version the API server serves, if any.
async fn served(client: &Client) -> anyhow::Result<Option<(ApiResource, &'static str)>> {
    let group = match kube::discovery::oneshot::group(client, GROUP).await {
        Ok(group) => group,
        Err(error) => return Err(error).context("discovering resource.k8s.io"),
    };
    for version in VERSIONS {
        let found = group
            .versioned_resources(version)
            .into_iter()
            .find(|(resource, _)| resource.kind == KIND);
        if let Some((resource, _)) = found {
            return Ok(Some((resource, version)));
        }
    }
    Ok(None)
}

fn converted(event: Event<DynamicObject>, version: &str) -> Event<TaintRule> {
    let rule = |object: DynamicObject| {
        taint_rule_of(&object, version).unwrap_or_else(|| {
            let name = object.metadata.name.clone().unwrap_or_default();
            tracing::warn!(rule = %name, "DeviceTaintRule does not decode; ignored");
            TaintRule {
                name,
                selector: None,
                taint: Default::default(),
            }
        })
    };
    match event {
        Event::Apply(object) => Event::Apply(rule(object)),
        Event::Delete(object) => Event::Delete(rule(object)),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(rule(object)),
        Event::InitDone => Event::InitDone,
    }
}

/// Watches the served DeviceTaintRules into the engine. The receiver turns true once the first
/// list is in the engine's queue (at once when no version is served).
pub async fn watch_taint_rules(
    client: &Client,
    trigger: std::sync::Arc<Notify>,
    engine: EngineThread,
) -> anyhow::Result<tokio_watch::Receiver<bool>> {
    let Some((resource, version)) = served(client).await? else {
        tracing::warn!(
            "resource.k8s.io serves no DeviceTaintRule version (v1, v1beta2, v1alpha3): allocating without admin device taint rules"
        );
        return Ok(tokio_watch::channel(true).1);
    };
    tracing::info!(version, "following DeviceTaintRules");
    let (listed, synced) = tokio_watch::channel(false);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let stream = watcher(api, watcher::Config::default())
        .backoff(controller_plumbing::WatchBackoff::default())
        .for_each(move |event| {
            let (engine, trigger, listed) = (engine.clone(), trigger.clone(), listed.clone());
            async move {
                match event {
                    Ok(event) => {
                        let done = matches!(event, Event::InitDone);
                        let event = converted(event, version);
                        engine
                            .send(move |feed: &mut EngineFeed| feed.taint_rule_event(event))
                            .await;
                        if done {
                            listed.send_replace(true);
                        }
                    }
                    Err(error) => tracing::warn!(%error, "DeviceTaintRule watch error"),
                }
                trigger.notify_one();
            }
        });
    tokio::spawn(stream);
    Ok(synced)
}
