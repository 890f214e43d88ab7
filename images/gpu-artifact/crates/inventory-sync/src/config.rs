//! The node agent's settings, from the environment the DaemonSet sets.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};

/// Where kernel uevents come from.
#[derive(Clone, Debug, PartialEq)]
pub enum UeventSource {
    /// The kernel's NETLINK_KOBJECT_UEVENT broadcast (production).
    Netlink,
    /// A Unix datagram socket the agent binds; each datagram is one raw uevent payload, parsed by the
    /// same code as netlink messages. For tests, whose fixture hosts have no kernel behind them.
    Socket(PathBuf),
}

#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// This node's name (`NODE_NAME`, from the downward API).
    pub node_name: String,
    /// Root under which every host path is read (`HOST_ROOT`, default `/`).
    pub host_root: PathBuf,
    /// `UEVENT_SOURCE`: `netlink` (default) or `socket:<path>`.
    pub uevents: UeventSource,
    /// PCI vendor ids whose display controllers are GPUs (`GPU_VENDORS`, default `10de`).
    pub vendors: Vec<u16>,
    /// `HEALTH_ADDR`, default `0.0.0.0:8080`.
    pub health_addr: SocketAddr,
}

impl AgentConfig {
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let node_name = get("NODE_NAME")
            .filter(|n| !n.is_empty())
            .context("NODE_NAME is required")?;
        let uevents = match get("UEVENT_SOURCE").as_deref() {
            None | Some("") | Some("netlink") => UeventSource::Netlink,
            Some(other) => match other.strip_prefix("socket:") {
                Some(path) if !path.is_empty() => UeventSource::Socket(PathBuf::from(path)),
                _ => bail!("UEVENT_SOURCE {other:?} is neither `netlink` nor `socket:<path>`"),
            },
        };
        let vendors = get("GPU_VENDORS")
            .unwrap_or_else(|| "10de".into())
            .split(',')
            .map(|v| {
                u16::from_str_radix(v.trim(), 16).with_context(|| format!("GPU_VENDORS entry {v:?} is not a hex id"))
            })
            .collect::<anyhow::Result<_>>()?;
        let health_addr = get("HEALTH_ADDR")
            .unwrap_or_else(|| "0.0.0.0:8080".into())
            .parse()
            .context("HEALTH_ADDR is not host:port")?;
        Ok(Self {
            node_name,
            host_root: PathBuf::from(get("HOST_ROOT").unwrap_or_else(|| "/".into())),
            uevents,
            vendors,
            health_addr,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> anyhow::Result<AgentConfig> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        AgentConfig::from_lookup(|key| env.get(key).cloned())
    }

    #[test]
    fn defaults_are_production_ones() {
        let c = config(&[("NODE_NAME", "w1")]).unwrap();
        assert_eq!(
            (c.uevents, c.vendors, c.host_root),
            (UeventSource::Netlink, vec![0x10de], PathBuf::from("/"))
        );
    }

    #[test]
    fn bad_settings_name_the_variable() {
        assert!(config(&[]).unwrap_err().to_string().contains("NODE_NAME"));
        let e = config(&[("NODE_NAME", "w1"), ("UEVENT_SOURCE", "udev")]).unwrap_err();
        assert!(e.to_string().contains("UEVENT_SOURCE"), "{e}");
        let e = config(&[("NODE_NAME", "w1"), ("GPU_VENDORS", "10de,zz")]).unwrap_err();
        assert!(e.to_string().contains("\"zz\""), "{e}");
        let c = config(&[
            ("NODE_NAME", "w1"),
            ("UEVENT_SOURCE", "socket:/run/u.sock"),
            ("GPU_VENDORS", "10de,1002"),
        ]);
        assert_eq!(c.unwrap().vendors, vec![0x10de, 0x1002]);
    }
}
