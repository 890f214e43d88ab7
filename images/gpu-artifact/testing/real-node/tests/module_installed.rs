//! The module installed on the real node as Deckhouse installs it (tools/testbed/node-up.sh: images
//! built from the workspace, hooks through their protocol, the real helm, the rendered objects
//! applied), proven Ready and working: every Deployment Available and every DaemonSet Ready on the
//! real kubelet, the components talking to the API server with their Pods' own ServiceAccount
//! tokens, gpu-node-agent reading the fixture host through its hostPath mounts and receiving kernel
//! uevents, gpu-handler registered with the real kubelet's plugin manager.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

#[tokio::test]
async fn every_deployment_is_available_and_every_daemonset_ready() {
    let (_, client) = node().await;
    wait_module_ready(&client).await.unwrap();
}

#[tokio::test]
async fn components_reach_the_api_server_with_their_pods_service_account_tokens() {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    let audit = node.dir.join("cluster/logs/audit.log");
    for (app, account) in [
        ("gpu-node-agent", "gpu-node-agent"),
        ("gpu-handler", "gpu-handler"),
        ("gpu-controller", "gpu-controller"),
        ("gpu-dra-controller", "gpu-dra-controller"),
    ] {
        let pods: BTreeMap<String, String> = module_pods(&client, app)
            .await
            .into_iter()
            .map(|p| (p.metadata.uid.clone().unwrap(), p.metadata.name.clone().unwrap()))
            .collect();
        let user = format!("system:serviceaccount:d8-gpu:{account}");
        let text = wait_until(
            &format!("a request of {user} from a Pod of {app} in the audit log"),
            Duration::from_secs(60),
            || {
                let audit = audit.clone();
                let pods = pods.clone();
                let user = user.clone();
                async move {
                    let text = match std::fs::read_to_string(&audit) {
                        Ok(text) => text,
                        Err(error) => return Ok(Progress::Pending(format!("{}: {error}", audit.display()))),
                    };
                    let found = text
                        .lines()
                        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                        .find(|event| {
                            event["user"]["username"] == user.as_str()
                                && event["user"]["extra"]["authentication.kubernetes.io/pod-uid"][0]
                                    .as_str()
                                    .is_some_and(|uid| pods.contains_key(uid))
                        });
                    Ok(match found {
                        Some(event) => Progress::Done(event.to_string()),
                        None => Progress::Pending(format!("{} audit events, Pods {pods:?}", text.lines().count())),
                    })
                }
            },
        )
        .await
        .unwrap();
        println!("{app}: {text}");
    }
}

#[tokio::test]
async fn node_agent_sees_the_fixture_host_and_receives_kernel_uevents() {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    let ns = namespace(&client, "agent").await;
    // Its hostPath /sys is the fixture's: eight H100 SXM5 and an A30, named from the fixture's pci.ids.
    let gpus = Api::<kube::api::DynamicObject>::all_with(
        client.clone(),
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gpu.deckhouse.io", "v1alpha1", "PhysicalGPU"),
            "physicalgpus",
        ),
    );
    let listed = gpus.list(&ListParams::default()).await.unwrap().items;
    // PhysicalGPUs are named <node>-<index>-<vendor>-<device>.
    let mut seen: Vec<String> = listed
        .iter()
        .map(|g| g.metadata.name.clone().unwrap())
        .filter(|name| name.starts_with(&format!("{}-", node.name)))
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 9, "PhysicalGPUs of {}: {seen:?}", node.name);
    assert_eq!(seen.iter().filter(|n| n.ends_with("-10de-2330")).count(), 8, "{seen:?}");
    assert_eq!(seen.iter().filter(|n| n.ends_with("-10de-20b7")).count(), 1, "{seen:?}");

    // A real kernel uevent (the machine's kernel, a "change" of one of its own PCI devices) reaches
    // the agent in its Pod: hostNetwork puts it in the node's network namespace, where the kernel
    // delivers uevents too.
    let agent = module_pods(&client, "gpu-node-agent").await.remove(0);
    let ip = agent.status.unwrap().pod_ip.unwrap();
    let before = sample(
        &scrape(node, &client, &ns, &ip, 4211, "daemonsets", "gpu-node-agent").await,
        "gpu_node_agent_pci_uevents_total",
    )
    .unwrap_or(0.0);
    let device = std::fs::read_dir("/sys/bus/pci/devices")
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(device.join("uevent"), "change").unwrap();
    let after = wait_until("the agent to count the uevent", Duration::from_secs(60), || {
        let ns = ns.to_string();
        let ip = ip.clone();
        let client = client.clone();
        async move {
            let value = sample(
                &scrape(node, &client, &ns, &ip, 4211, "daemonsets", "gpu-node-agent").await,
                "gpu_node_agent_pci_uevents_total",
            )
            .unwrap_or(0.0);
            Ok(if value > before {
                Progress::Done(value)
            } else {
                Progress::Pending(format!("{value} (before {before})"))
            })
        }
    })
    .await
    .unwrap();
    println!(
        "gpu_node_agent_pci_uevents_total {before} -> {after} after a change uevent of {}",
        device.display()
    );
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn handler_registers_with_the_real_kubelets_plugin_manager() {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    let ns = namespace(&client, "handler").await;
    let handler: Pod = module_pods(&client, "gpu-handler").await.remove(0);
    let ip = handler.status.unwrap().pod_ip.unwrap();
    let metrics = scrape(node, &client, &ns, &ip, 8443, "daemonsets", "gpu-handler").await;
    assert_eq!(
        sample(&metrics, "gpu_handler_plugin_registered"),
        Some(1.0),
        "{metrics}"
    );
    // The kubelet found the registration socket in its plugins_registry and keeps the plugin.
    let socket = "/var/lib/kubelet/plugins_registry/gpu.deckhouse.io-reg.sock";
    assert_eq!(
        node.files().file_type(socket).unwrap(),
        Some(rustix::fs::FileType::Socket),
        "the node's {socket}"
    );
    let log = std::fs::read_to_string(node.dir.join("logs/kubelet.log")).unwrap();
    assert!(
        log.contains("gpu.deckhouse.io"),
        "the kubelet's log never names the plugin"
    );
    delete_namespace(&client, &ns).await;
}
