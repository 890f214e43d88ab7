//! The event streams: the injected source a test drives, and the real
//! kernel socket.

use std::fs;
use std::io;
use std::time::Duration;

use futures::StreamExt;
use host_fixtures::{FixtureDevice, NamedHost};
use host_inventory::uevent::{KernelUEventSocket, UEventAction, UEventError, UEventSourceError, injected, listen};
use host_inventory::{GpuFilter, HostRoot, scan_gpus};

#[tokio::test]
async fn injected_hotplug_reaches_the_stream_and_a_rescan_sees_the_tree_change() {
    let host = NamedHost::A30Pcie.build();
    let root = HostRoot::new(host.root());
    let (injector, mut events) = injected();

    for payload in host.add_device(&FixtureDevice::h100_pcie("0000:41:00.0")) {
        assert!(injector.send(payload));
    }
    let add = events.next().await.unwrap().unwrap();
    let bind = events.next().await.unwrap().unwrap();
    assert_eq!((add.action, bind.action), (UEventAction::Add, UEventAction::Bind));
    assert_eq!(bind.pci_slot_name.as_deref(), Some("0000:41:00.0"));
    let after_add: Vec<_> = scan_gpus(&root, &GpuFilter::nvidia(), None)
        .gpus
        .into_iter()
        .map(|g| g.address)
        .collect();
    assert_eq!(after_add, ["0000:01:00.0", "0000:41:00.0"]);

    for payload in host.remove_device("0000:01:00.0") {
        injector.send(payload);
    }
    let actions: Vec<UEventAction> = vec![
        events.next().await.unwrap().unwrap().action,
        events.next().await.unwrap().unwrap().action,
    ];
    assert_eq!(actions, [UEventAction::Unbind, UEventAction::Remove]);
    let after_remove = scan_gpus(&root, &GpuFilter::nvidia(), None).gpus;
    assert_eq!(
        (after_remove[0].address.as_str(), after_remove[0].index),
        ("0000:41:00.0", 0)
    );
}

#[tokio::test]
async fn the_stream_keeps_pci_events_reports_errors_and_goes_on() {
    let host = NamedHost::A30Pcie.build();
    let (injector, events) = injected();
    injector.send(b"add@/module/nvidia\0ACTION=add\0DEVPATH=/module/nvidia\0SUBSYSTEM=module\0".to_vec());
    injector.send(b"libudev\0\xfe\xed\xca\xfe".to_vec());
    injector.send(b"garbage".to_vec());
    injector.send_error(io::Error::from_raw_os_error(105)); // ENOBUFS on Linux: events were lost
    injector.send(host.change_event("0000:01:00.0"));
    drop(injector);

    let items: Vec<_> = events.collect().await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(matches!(
        &items[0],
        Err(UEventSourceError::Parse(UEventError::BadHeader { header })) if header == "garbage"
    ));
    assert!(matches!(&items[1], Err(UEventSourceError::Receive(e)) if e.raw_os_error() == Some(105)));
    let change = items[2].as_ref().unwrap();
    assert_eq!(
        (change.action, change.pci_slot_name.as_deref()),
        (UEventAction::Change, Some("0000:01:00.0"))
    );
}

#[tokio::test]
async fn the_kernel_socket_opens() {
    KernelUEventSocket::open().expect("bind a NETLINK_KOBJECT_UEVENT socket to group 1");
}

/// The real path end to end: the kernel sends a `change` uevent for a real
/// PCI device when its `uevent` file is written (root only), and the
/// listener yields it parsed.
#[tokio::test]
async fn the_kernel_socket_delivers_a_real_pci_uevent() {
    let mut events = listen().expect("open the kernel uevent socket");
    let mut devices: Vec<_> = fs::read_dir("/sys/bus/pci/devices")
        .expect("this test needs the host's sysfs")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    devices.sort();
    let slot = devices
        .first()
        .expect("this test needs at least one PCI device on the host")
        .clone();
    fs::write(format!("/sys/bus/pci/devices/{slot}/uevent"), "change")
        .expect("this test needs root to trigger a uevent");

    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events
                .next()
                .await
                .expect("the stream does not end")
                .expect("a valid event");
            if event.pci_slot_name.as_deref() == Some(slot.as_str()) {
                return event;
            }
        }
    })
    .await
    .expect("the kernel's change event arrives within 10 s");
    assert_eq!(event.action, UEventAction::Change);
    assert!(event.devpath.ends_with(&slot), "{}", event.devpath);
    assert!(event.pci_id.is_some());
}
