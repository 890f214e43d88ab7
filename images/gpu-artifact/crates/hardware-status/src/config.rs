//! The handler's settings, from the environment the DaemonSet sets.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use gpu_health::{DEFAULT_APPLICATION_XIDS, DEFAULT_QUIET_PERIOD, DEFAULT_RECOVERABLE_XIDS, HealthPolicy, XidPolicy};

use crate::health_tracker::HealthFiles;

#[derive(Clone, Debug, PartialEq)]
pub struct HandlerConfig {
    /// This node's name (`NODE_NAME`, from the downward API).
    pub node_name: String,
    /// Where NVML is loaded from (`NVML_LIBRARY`, default `libnvidia-ml.so.1` through the `dlopen`
    /// search path). A `:`-separated list of absolute paths is probed in order, the first that exists
    /// taken (the driver root's library directories differ between distributions): the driver's library
    /// is opened by its path, never through a search path that would put the host's libc before the
    /// image's.
    pub nvml_library: PathBuf,
    /// `HEALTH_ADDR`, default `0.0.0.0:8080`.
    pub health_addr: SocketAddr,
    /// The health policy (ModuleConfig `health`): `XID_APPLICATION`, `XID_IGNORED`, `XID_CRITICAL`,
    /// `XID_RECOVERABLE` (comma-separated Xids; unset: the defaults, empty: none),
    /// `HEALTH_QUIET_PERIOD` (`10m`), `HEALTH_NO_EXECUTE` (`true`/`false`).
    pub health_policy: HealthPolicy,
    /// Where the health ledger is kept; set by the binary from the plugin directory and host root.
    /// `None` keeps it in memory only (tests of the status loop alone).
    pub health_files: Option<HealthFiles>,
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
            .map_or_else(|| "libnvidia-ml.so.1".into(), |list| first_existing(&list));
        let health_addr = get("HEALTH_ADDR")
            .unwrap_or_else(|| "0.0.0.0:8080".into())
            .parse()
            .context("HEALTH_ADDR is not host:port")?;
        let health_policy = health_policy(&get)?;
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
            health_policy,
            health_files: None,
            nvml_resync,
        })
    }
}

/// The first of the `:`-separated candidates that exists; the first one when none does (loading it then
/// fails and says which).
fn first_existing(candidates: &str) -> String {
    let mut all = candidates.split(':').filter(|c| !c.is_empty());
    let first = all.clone().next().unwrap_or(candidates).to_owned();
    all.find(|c| std::path::Path::new(c).exists())
        .map_or(first, str::to_owned)
}

fn health_policy(get: &impl Fn(&str) -> Option<String>) -> anyhow::Result<HealthPolicy> {
    let xids = |key: &str, default: &[u64]| -> anyhow::Result<Vec<u64>> {
        let Some(list) = get(key) else {
            return Ok(default.to_vec());
        };
        list.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| {
                x.parse::<u64>()
                    .with_context(|| format!("{key} entry {x:?} is not an Xid number"))
            })
            .collect()
    };
    let quiet_period = match get("HEALTH_QUIET_PERIOD").filter(|v| !v.is_empty()) {
        None => DEFAULT_QUIET_PERIOD,
        Some(text) => {
            parse_interval(&text).with_context(|| format!("HEALTH_QUIET_PERIOD {text:?} is not like 10m, 90s or 1h"))?
        }
    };
    let no_execute = match get("HEALTH_NO_EXECUTE").as_deref().map(str::trim) {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(other) => bail!("HEALTH_NO_EXECUTE must be true or false, not {other:?}"),
    };
    Ok(HealthPolicy {
        xid: XidPolicy::new(
            xids("XID_APPLICATION", &DEFAULT_APPLICATION_XIDS)?,
            xids("XID_IGNORED", &[])?,
            xids("XID_CRITICAL", &[])?,
            xids("XID_RECOVERABLE", &DEFAULT_RECOVERABLE_XIDS)?,
        ),
        quiet_period,
        no_execute,
    })
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
        "h" => Duration::from_secs(number * 3600),
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
    fn nvml_is_opened_by_the_first_candidate_path_that_exists() {
        let dir = std::env::temp_dir().join(format!("nvml-candidates-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("usr/lib64")).unwrap();
        let found = dir.join("usr/lib64/libnvidia-ml.so.1");
        std::fs::write(&found, "").unwrap();
        let debian = dir.join("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
        let list = format!("{}:{}", debian.display(), found.display());
        assert_eq!(
            config(&[("NODE_NAME", "n"), ("NVML_LIBRARY", &list)])
                .unwrap()
                .nvml_library,
            found
        );
        std::fs::remove_file(&found).unwrap();
        assert_eq!(
            config(&[("NODE_NAME", "n"), ("NVML_LIBRARY", &list)])
                .unwrap()
                .nvml_library,
            debian,
            "none there: the first one, whose load then fails naming it"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn defaults_are_production_ones() {
        let c = config(&[("NODE_NAME", "w1")]).unwrap();
        assert_eq!(c.nvml_library, PathBuf::from("libnvidia-ml.so.1"));
        assert_eq!(c.health_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.health_policy, HealthPolicy::default());
        assert_eq!(c.nvml_resync, Some(Duration::from_secs(60)));
    }

    #[test]
    fn settings_are_read_and_bad_ones_name_the_variable() {
        let c = config(&[
            ("NODE_NAME", "w1"),
            ("NVML_LIBRARY", "/opt/nvidia/libnvidia-ml.so.1"),
            ("XID_IGNORED", "63, 92"),
            ("XID_RECOVERABLE", ""),
            ("HEALTH_QUIET_PERIOD", "5m"),
            ("HEALTH_NO_EXECUTE", "true"),
            ("NVML_RESYNC_INTERVAL", "500ms"),
        ])
        .unwrap();
        assert_eq!(c.health_policy.xid.classify(63), gpu_health::XidClass::Ignored);
        assert_eq!(
            c.health_policy.xid.classify(13),
            gpu_health::XidClass::Application,
            "defaults stay"
        );
        assert!(!c.health_policy.xid.recoverable(94), "an empty list is empty");
        assert_eq!(c.health_policy.quiet_period, Duration::from_secs(300));
        assert!(c.health_policy.no_execute);
        assert_eq!(c.nvml_resync, Some(Duration::from_millis(500)));
        assert_eq!(c.nvml_library, PathBuf::from("/opt/nvidia/libnvidia-ml.so.1"));
        let off = config(&[("NODE_NAME", "w1"), ("NVML_RESYNC_INTERVAL", "0")]).unwrap();
        assert_eq!(off.nvml_resync, None);
        assert!(config(&[]).unwrap_err().to_string().contains("NODE_NAME"));
        let e = config(&[("NODE_NAME", "w1"), ("XID_CRITICAL", "63,x")]).unwrap_err();
        assert!(e.to_string().contains("XID_CRITICAL entry \"x\""), "{e}");
        let e = config(&[("NODE_NAME", "w1"), ("HEALTH_NO_EXECUTE", "yes")]).unwrap_err();
        assert!(e.to_string().contains("HEALTH_NO_EXECUTE"), "{e}");
        let e = config(&[("NODE_NAME", "w1"), ("NVML_RESYNC_INTERVAL", "1d")]).unwrap_err();
        assert!(e.to_string().contains("NVML_RESYNC_INTERVAL"), "{e}");
    }
}
