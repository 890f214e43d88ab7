//! gpu-node-agent against the real API server: PhysicalGPUs appear with the host's facts, follow
//! hotplug uevents, are recreated and corrected, survive a restart without writes, and go with
//! their Node. The agent runs as a real process under a ServiceAccount with the agent's RBAC.
//! Deadlines here are generous on purpose: how fast hotplug shows up is measured by `make bench`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_api::{DriverType, PhysicalGPU};
use host_fixtures::{FixtureDevice, HostTree, NamedHost};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

struct Setup {
    ns: TestNamespace,
    node: ReadyNode,
    ws: AgentWorkspace,
    host: HostTree,
    kubeconfig: std::path::PathBuf,
    gpus: Api<PhysicalGPU>,
}

async fn setup(test: &str, fixture: NamedHost) -> Setup {
    let ns = TestNamespace::create(test).await.unwrap();
    install_crds(&ns.client()).await;
    let node = ReadyNode::register(&ns, "gpu", BTreeMap::new()).await.unwrap();
    let ws = AgentWorkspace::new();
    std::fs::create_dir_all(ws.host_root()).unwrap();
    let host = HostTree::at(&ws.host_root());
    fixture.build_into(&host);
    let kubeconfig = kubeconfig_for(&ns, "gpu-node-agent", node_agent_rules(), ws.dir.path()).await;
    let gpus = Api::<PhysicalGPU>::all(ns.client());
    Setup {
        ns,
        node,
        ws,
        host,
        kubeconfig,
        gpus,
    }
}

async fn node_gpus(s: &Setup) -> Vec<PhysicalGPU> {
    let params = ListParams::default().labels(&format!("gpu.deckhouse.io/node={}", s.node.name()));
    s.gpus.list(&params).await.unwrap().items
}

/// Waits for `want` PhysicalGPUs whose status is written: the agent creates an object and then
/// writes its status subresource, so a listed object may briefly have no status yet.
async fn wait_count(s: &Setup, want: usize, within: Duration) -> Vec<PhysicalGPU> {
    wait_until(
        &format!("{want} published PhysicalGPUs on {}", s.node.name()),
        within,
        || async {
            let gpus = node_gpus(s).await;
            let published = gpus
                .iter()
                .all(|g| g.status.as_ref().is_some_and(|st| st.pci_info.is_some()));
            Ok(if gpus.len() == want && published {
                Progress::Done(gpus)
            } else {
                Progress::Pending(format!("{} present", gpus.len()))
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a30_host_is_published_with_its_facts() {
    let s = setup("agent-a30", NamedHost::A30Pcie).await;
    let (agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;

    let gpus = wait_count(&s, 1, Duration::from_secs(10)).await;
    let gpu = &gpus[0];
    assert_eq!(gpu.name_any(), format!("{}-0-10de-20b7", s.node.name()));
    let labels = gpu.labels();
    assert_eq!(labels["gpu.deckhouse.io/vendor"], "nvidia");
    assert_eq!(labels["gpu.deckhouse.io/device"], "a30-pcie");
    let owner = &gpu.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", s.node.name()));

    let status = serde_json::to_value(gpu.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        status["pciInfo"],
        json!({"address": "0000:01:00.0",
               "class": {"code": "0302", "name": "3D controller"},
               "vendor": {"id": "10de", "name": "NVIDIA Corporation"},
               "device": {"id": "20b7", "name": "GA100GL [A30 PCIe]"},
               "subsystem": {"vendorID": "10de", "deviceID": "1532"},
               "iommuGroup": 13,
               "pcieRoot": "pci0000:00"}),
        "PCI facts from sysfs and pci.ids (the root complex from the device's sysfs path); no numaNode where the platform reports -1"
    );
    assert_eq!(
        status["nodeInfo"]["os"],
        json!({"id": "ubuntu", "version": "22.04", "name": "Ubuntu"})
    );
    assert_eq!(status["nodeInfo"]["kernelRelease"], host_fixtures::UBUNTU_2204_KERNEL);
    assert_eq!(status["nodeInfo"]["bareMetal"], true);
    assert_eq!(status["currentState"]["driverType"], "Nvidia");
    assert!(
        status.get("capabilities").is_none(),
        "capabilities only come with DriverReady=True"
    );

    let node = Api::<Node>::all(s.ns.client()).get(s.node.name()).await.unwrap();
    let node_labels = node.labels();
    assert_eq!(node_labels["gpu.deckhouse.io/os.id"], "ubuntu");
    assert_eq!(node_labels["gpu.deckhouse.io/os.version"], "22.04");
    assert_eq!(
        node_labels["gpu.deckhouse.io/kernel.version"],
        host_fixtures::UBUNTU_2204_KERNEL
    );
    assert_eq!(node_labels["gpu.deckhouse.io/baremetal"], "true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hotplug_removes_and_adds_and_follows_driver_binding() {
    let s = setup("agent-hotplug", NamedHost::A30Pcie).await;
    let (agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    wait_count(&s, 1, Duration::from_secs(10)).await;

    let uevents = s.host.remove_device("0000:01:00.0");
    send_uevents(&s.ws.socket(), &uevents);
    wait_count(&s, 0, Duration::from_secs(10)).await;

    let uevents = s.host.add_device(&FixtureDevice::a30_pcie("0000:01:00.0"));
    send_uevents(&s.ws.socket(), &uevents);
    let gpus = wait_count(&s, 1, Duration::from_secs(10)).await;
    assert_eq!(
        gpus[0].status.as_ref().unwrap().pci_info.as_ref().unwrap().address,
        "0000:01:00.0"
    );

    send_uevents(&s.ws.socket(), &s.host.bind_driver("0000:01:00.0", "vfio-pci"));
    let name = gpus[0].name_any();
    wait_until("driverType VFIO", Duration::from_secs(10), || async {
        let gpu = s.gpus.get(&name).await?;
        let driver = gpu.status.and_then(|st| st.current_state).and_then(|c| c.driver_type);
        Ok(if driver == Some(DriverType::Vfio) {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{driver:?}"))
        })
    })
    .await
    .unwrap();

    // A malformed uevent is dropped; the agent keeps serving.
    send_uevents(&s.ws.socket(), &[b"garbage without header".to_vec()]);
    send_uevents(&s.ws.socket(), &s.host.unbind_driver("0000:01:00.0"));
    wait_until("driverType absent after unbind", Duration::from_secs(10), || async {
        let gpu = s.gpus.get(&name).await?;
        let state = gpu.status.and_then(|st| st.current_state);
        Ok(if state.as_ref().and_then(|c| c.driver_type).is_none() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{state:?}"))
        })
    })
    .await
    .unwrap();
    let mut agent = agent;
    assert!(
        agent.is_running(),
        "the agent survives a malformed uevent:\n{}",
        agent.log()
    );
    assert!(agent.log().contains("dropped a malformed uevent"), "the drop is logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_objects_are_recreated_and_foreign_status_is_corrected() {
    let s = setup("agent-repair", NamedHost::A100SxmX8).await;
    let (agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    let gpus = wait_count(&s, 8, Duration::from_secs(10)).await;
    let mut numa: Vec<_> = gpus
        .iter()
        .map(|g| g.status.as_ref().unwrap().pci_info.as_ref().unwrap().numa_node)
        .collect();
    numa.sort();
    assert_eq!(
        numa,
        [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2), Some(3), Some(3)]
    );

    let victim = format!("{}-3-10de-20b2", s.node.name());
    let old_uid = s.gpus.get(&victim).await.unwrap().uid();
    s.gpus.delete(&victim, &DeleteParams::default()).await.unwrap();
    wait_until("deleted PhysicalGPU recreated", Duration::from_secs(5), || async {
        Ok(match s.gpus.get_opt(&victim).await? {
            Some(gpu) if gpu.uid() != old_uid => Progress::Done(()),
            other => Progress::Pending(format!("uid {:?}", other.map(|g| g.uid()))),
        })
    })
    .await
    .unwrap();

    let tamper = json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU", "metadata": {"name": victim},
                        "status": {"pciInfo": {"address": "0000:ff:00.0", "class": {"code": "0300"}, "vendor": {"id": "10de"}, "device": {"id": "0000"}}}});
    s.gpus
        .patch_status(
            &victim,
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(&tamper),
        )
        .await
        .unwrap();
    wait_until("edited status corrected", Duration::from_secs(5), || async {
        let gpu = s.gpus.get(&victim).await?;
        let address = gpu.status.and_then(|st| st.pci_info).map(|p| p.address);
        Ok(if address.as_deref() == Some("0000:4e:00.0") {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{address:?}"))
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_makes_no_duplicates_and_no_writes() {
    let s = setup("agent-restart", NamedHost::H100Pcie).await;
    let (mut agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    let before = wait_count(&s, 1, Duration::from_secs(10)).await;
    assert_eq!(
        agent.terminate(Duration::from_secs(5)),
        Some(0),
        "SIGTERM is a clean exit"
    );

    let (agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = node_gpus(&s).await;
    assert_eq!(after.len(), 1, "no duplicates");
    assert_eq!(
        after[0].resource_version(),
        before[0].resource_version(),
        "no write after restart"
    );
    assert!(
        !agent.log().contains("inventory synced"),
        "the restarted agent reported no change:\n{}",
        agent.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_takes_its_physicalgpus_along() {
    let s = setup("agent-node-gone", NamedHost::ConsumerWithAudio).await;
    let (mut agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    let gpus = wait_count(&s, 1, Duration::from_secs(10)).await;
    assert_eq!(
        gpus[0].labels()["gpu.deckhouse.io/device"],
        "geforce-rtx-4090",
        "the audio function is not a GPU"
    );
    // The DaemonSet Pod dies with its node.
    agent.terminate(Duration::from_secs(5));
    Api::<Node>::all(s.ns.client())
        .delete(s.node.name(), &DeleteParams::default())
        .await
        .unwrap();
    wait_count(&s, 0, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physicalgpu_of_another_node_is_never_taken_over() {
    let s = setup("agent-foreign", NamedHost::A30Pcie).await;
    let name = format!("{}-0-10de-20b7", s.node.name());
    let mut foreign = PhysicalGPU::new(&name, Default::default());
    foreign.metadata.labels = Some(BTreeMap::from([(
        "gpu.deckhouse.io/node".to_owned(),
        "other-node".to_owned(),
    )]));
    let foreign = s.gpus.create(&PostParams::default(), &foreign).await.unwrap();

    let (agent, port) = start_agent(&s.ws, s.node.name(), &s.kubeconfig);
    wait_ready(port, &agent).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stored = s.gpus.get(&name).await.unwrap();
    assert_eq!(stored.labels()["gpu.deckhouse.io/node"], "other-node");
    assert_eq!(stored.resource_version(), foreign.resource_version(), "not written");
    assert!(agent.log().contains("belongs to another node"), "{}", agent.log());
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(s.ns.client());
    wait_until(
        "PhysicalGPUNameTaken event on the node",
        Duration::from_secs(5),
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("regarding.name={}", s.node.name())))
                .await?;
            Ok(
                if list
                    .items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("PhysicalGPUNameTaken"))
                {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{} events", list.items.len()))
                },
            )
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_down_at_start_is_retried_without_a_crash_loop() {
    let s = setup("agent-api-down", NamedHost::VmQemu).await;
    // The agent's kubeconfig points at a port where nothing listens yet.
    // Held (not listening) until the relay below binds it, so nothing else takes it meanwhile.
    let reserved = reserve_port();
    let port = reserved.number();
    let mut kubeconfig: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&s.kubeconfig).unwrap()).unwrap();
    let real = kubeconfig["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_owned();
    kubeconfig["clusters"][0]["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    let delayed = s.ws.dir.path().join("delayed.kubeconfig");
    std::fs::write(&delayed, kubeconfig.to_string()).unwrap();

    let (mut agent, health) = start_agent(&s.ws, s.node.name(), &delayed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        agent.is_running(),
        "still running while the API is down:\n{}",
        agent.log()
    );
    assert!(
        agent.log().contains("failed"),
        "the failed attempts are logged:\n{}",
        agent.log()
    );
    assert!(node_gpus(&s).await.is_empty());

    // The API server "comes up" at that address: a TCP relay to the real one.
    let upstream = real.trim_start_matches("https://").to_owned();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    wait_ready(health, &agent).await;
    let gpus = wait_count(&s, 1, Duration::from_secs(30)).await;
    let node_info = gpus[0].status.as_ref().unwrap().node_info.clone().unwrap();
    assert_eq!(node_info.bare_metal, Some(false), "a QEMU guest is not bare metal");
}
