//! OS, kernel and bare-metal facts read from fixture hosts.

use host_fixtures::{HostTree, NamedHost, UBUNTU_2204_KERNEL};
use host_inventory::{HostFacts, HostRoot, read_host_facts};

fn facts(host: &HostTree) -> HostFacts {
    read_host_facts(&HostRoot::new(host.root()))
}

#[test]
fn a30_host_is_bare_metal_ubuntu_2204() {
    let host = NamedHost::A30Pcie.build();
    assert_eq!(
        facts(&host),
        HostFacts {
            os_id: Some("ubuntu".into()),
            os_version: Some("22.04".into()),
            os_name: Some("Ubuntu".into()),
            kernel_release: Some(UBUNTU_2204_KERNEL.into()),
            bare_metal: true,
            bare_metal_reason: "DMI product_name \"PowerEdge R750xa\", sys_vendor \"Dell Inc.\": no hypervisor marker"
                .into(),
        }
    );
}

#[test]
fn qemu_guest_is_not_bare_metal() {
    let facts = facts(&NamedHost::VmQemu.build());
    assert!(!facts.bare_metal);
    assert_eq!(
        facts.bare_metal_reason,
        "DMI sys_vendor \"QEMU\" names a hypervisor or cloud (QEMU)"
    );
}

#[test]
fn every_named_host_but_the_vm_and_the_unreadable_one_is_bare_metal() {
    for named in NamedHost::ALL {
        let expected = !matches!(named, NamedHost::VmQemu | NamedHost::DmiUnreadable);
        assert_eq!(facts(&named.build()).bare_metal, expected, "{}", named.name());
    }
}

#[test]
fn os_release_falls_back_to_usr_lib() {
    let host = HostTree::new();
    host.write_file(
        "usr/lib/os-release",
        "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n",
    );
    let facts = facts(&host);
    assert_eq!(facts.os_id.as_deref(), Some("debian"));
    assert_eq!(facts.os_version.as_deref(), Some("12"));
    assert_eq!(facts.os_name.as_deref(), Some("Debian GNU/Linux"));
}

#[test]
fn missing_sources_leave_their_facts_absent() {
    let host = HostTree::new();
    host.write_file("etc/os-release", "ID=alpine\n");
    host.write_file("proc/sys/kernel/osrelease", "\n");
    let facts = facts(&host);
    assert_eq!(facts.os_id.as_deref(), Some("alpine"));
    assert_eq!(facts.os_version, None);
    assert_eq!(facts.os_name, None);
    assert_eq!(facts.kernel_release, None);
    assert!(!facts.bare_metal);
}
