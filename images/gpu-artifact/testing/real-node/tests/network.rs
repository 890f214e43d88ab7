//! The real node cannot send a packet off the machine: its network namespace (the node's address,
//! the Pods' bridge, the Service range, the API server) has no default route and no interface that
//! leads out; a connect to a public or a private address fails as unreachable, from the node and from
//! a Pod, while the Pod still reaches the API server through its Service.

mod support;

use support::*;

/// Connects from the node's network namespace (bash's /dev/tcp) and returns what it said.
fn connect_from_node(node: &real_node::node::RealNode, address: &str) -> String {
    let out = node
        .exec(&[
            "timeout",
            "10",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{address}/443 && echo connected"),
        ])
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn no_packet_can_leave_the_node() {
    let (node, client) = node().await;
    let routes = node.exec(&["ip", "-4", "route", "show", "table", "all"]).unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    println!("routes of the node:\n{routes}");
    assert!(
        !routes.lines().any(|l| l.starts_with("default")),
        "a default route:\n{routes}"
    );
    let links = String::from_utf8_lossy(&node.exec(&["ip", "-o", "link"]).unwrap().stdout).into_owned();
    for link in links.lines() {
        let name = link.split(':').nth(1).unwrap_or_default().trim();
        assert!(
            ["lo", "node0@node0-peer", "node0-peer@node0", "cni0"].contains(&name) || name.starts_with("veth"),
            "an interface the test bed did not make: {link}"
        );
    }
    for address in ["1.1.1.1", "8.8.8.8", "192.168.1.1", "172.16.0.1", "10.10.10.10"] {
        let said = connect_from_node(node, address);
        assert!(said.contains("Network is unreachable"), "node to {address}: {said}");
    }

    let ns = namespace(&client, "network").await;
    let script = "for a in 1.1.1.1 192.168.1.1 10.10.10.10; do echo \"== $a\"; nc -w 5 $a 443 </dev/null 2>&1; echo \"exit $?\"; done; \
                  echo '== api'; nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null 2>&1; echo \"exit $?\"";
    let out = run_to_end(&client, &ns, &workload_pod("probe", script, &[], &[])).await;
    for address in ["1.1.1.1", "192.168.1.1", "10.10.10.10"] {
        let section = out
            .split(&format!("== {address}\n"))
            .nth(1)
            .unwrap()
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        // The node answers a forwarded packet it has no route for with an ICMP error, which the
        // kernel rate-limits per host: a later attempt may only time out. Either way the node has no
        // route that could carry it (checked below), so nothing went out.
        assert!(
            section.contains("unreachable") || section.contains("No route to host") || section.contains("timed out"),
            "Pod to {address}: {section}"
        );
        let route = node.exec(&["ip", "route", "get", address]).unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&route.stdout),
            String::from_utf8_lossy(&route.stderr)
        );
        assert!(
            !route.status.success() && said.contains("unreachable"),
            "the node routes {address}: {said}"
        );
        assert!(!section.ends_with("exit 0"), "Pod to {address}: {section}");
    }
    let api = out.split("== api\n").nth(1).unwrap();
    assert!(
        api.trim_end().ends_with("exit 0"),
        "the Pod must still reach the API server's Service: {api}"
    );
    delete_namespace(&client, &ns).await;
}
