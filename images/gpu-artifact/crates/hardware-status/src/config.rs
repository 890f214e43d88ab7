//! The handler's settings, from the environment the DaemonSet sets.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

#[derive(Clone, Debug, PartialEq)]
pub struct HandlerConfig {
    /// This node's name (`NODE_NAME`, from the downward API).
    pub node_name: String,
    /// Where NVML is loaded from (`NVML_LIBRARY`, default `libnvidia-ml.so.1` through the `dlopen`
    /// search path).
    pub nvml_library: PathBuf,
    /// `HEALTH_ADDR`, default `0.0.0.0:8080`.
    pub health_addr: SocketAddr,
    /// Xids treated as application errors on top of the backend's list (`ADDITIONAL_XIDS_TO_IGNORE`,
    /// comma-separated), like NVIDIA's DRA driver `--additional-xids-to-ignore`.
    pub additional_xids_to_ignore: Vec<u64>,
    /// How often NVML is re-read without any other trigger (`NVML_RESYNC_INTERVAL`: `60s`, `500ms`,
    /// `5m`; `0` turns it off). Default 60 s. See [`crate::handler`] for why it exists.
    pub nvml_resync: Option<Duration>,
}

impl HandlerConfig {
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let node_name = get("NODE_NAME")
            .filter(|n| !n.is_empty())
            .context("NODE_NAME is required")?;
        let nvml_library = get("NVML_LIBRARY")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "libnvidia-ml.so.1".into());
        let health_addr = get("HEALTH_ADDR")
            .unwrap_or_else(|| "0.0.0.0:8080".into())
            .parse()
            .context("HEALTH_ADDR is not host:port")?;
        let additional_xids_to_ignore = get("ADDITIONAL_XIDS_TO_IGNORE")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| {
                x.parse::<u64>()
                    .with_context(|| format!("ADDITIONAL_XIDS_TO_IGNORE entry {x:?} is not an Xid number"))
            })
            .collect::<anyhow::Result<_>>()?;
        let nvml_resync = match get("NVML_RESYNC_INTERVAL").filter(|v| !v.is_empty()) {
            None => Some(Duration::from_secs(60)),
            Some(text) => {
                let interval = parse_interval(&text)
                    .with_context(|| format!("NVML_RESYNC_INTERVAL {text:?} is not like 60s, 500ms, 5m or 0"))?;
                (!interval.is_zero()).then_some(interval)
            }
        };
        Ok(Self {
            node_name,
            nvml_library: PathBuf::from(nvml_library),
            health_addr,
            additional_xids_to_ignore,
            nvml_resync,
        })
    }
}

fn parse_interval(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse()?;
    Ok(match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number * 60),
        "" if number == 0 => Duration::ZERO,
        _ => bail!("unknown unit {unit:?}"),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> anyhow::Result<HandlerConfig> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        HandlerConfig::from_lookup(|key| env.get(key).cloned())
    }

    #[test]
    fn defaults_are_production_ones() {
        let c = config(&[("NODE_NAME", "w1")]).unwrap();
        assert_eq!(c.nvml_library, PathBuf::from("libnvidia-ml.so.1"));
        assert_eq!(c.health_addr, "0.0.0.0:8080".parse().unwrap());
        assert!(c.additional_xids_to_ignore.is_empty());
        assert_eq!(c.nvml_resync, Some(Duration::from_secs(60)));
    }

    #[test]
    fn settings_are_read_and_bad_ones_name_the_variable() {
        let c = config(&[
            ("NODE_NAME", "w1"),
            ("NVML_LIBRARY", "/opt/nvidia/libnvidia-ml.so.1"),
            ("ADDITIONAL_XIDS_TO_IGNORE", "63, 92"),
            ("NVML_RESYNC_INTERVAL", "500ms"),
        ])
        .unwrap();
        assert_eq!(c.additional_xids_to_ignore, vec![63, 92]);
        assert_eq!(c.nvml_resync, Some(Duration::from_millis(500)));
        assert_eq!(c.nvml_library, PathBuf::from("/opt/nvidia/libnvidia-ml.so.1"));
        let off = config(&[("NODE_NAME", "w1"), ("NVML_RESYNC_INTERVAL", "0")]).unwrap();
        assert_eq!(off.nvml_resync, None);
        assert!(config(&[]).unwrap_err().to_string().contains("NODE_NAME"));
        let e = config(&[("NODE_NAME", "w1"), ("ADDITIONAL_XIDS_TO_IGNORE", "63,x")]).unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        let e = config(&[("NODE_NAME", "w1"), ("NVML_RESYNC_INTERVAL", "1h")]).unwrap_err();
        assert!(e.to_string().contains("NVML_RESYNC_INTERVAL"), "{e}");
    }
}
