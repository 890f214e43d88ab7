//! Strict decoding of an opaque config from the `parameters` of a DeviceClass or claim config.
//!
//! Written by hand over the JSON value rather than through serde so that every refusal names the
//! field's full path and the values that would be accepted; an unknown field anywhere is an error
//! (a misspelt `timeslicing` must not silently become the default). `null` counts as absent.

use serde_json::{Map, Value};

use super::OPAQUE_CONFIG_API_VERSION;
use super::error::ConfigError;
use super::types::{
    GpuConfig, GpuSharing, MigDeviceConfig, MigSharing, MpsConfig, OpaqueConfig, SharingStrategy, TimeSliceInterval,
    TimeSlicingConfig, VfioDeviceConfig,
};

const KINDS: &[(&str, Kind)] = &[
    ("GpuConfig", Kind::Gpu),
    ("MigDeviceConfig", Kind::Mig),
    ("VfioDeviceConfig", Kind::Vfio),
];
const GPU_STRATEGIES: &[(&str, SharingStrategy)] = &[
    ("Exclusive", SharingStrategy::Exclusive),
    ("TimeSlicing", SharingStrategy::TimeSlicing),
    ("MPS", SharingStrategy::Mps),
];
/// Time slicing has no effect inside a MIG device, so it is not offered there.
const MIG_STRATEGIES: &[(&str, SharingStrategy)] =
    &[("Exclusive", SharingStrategy::Exclusive), ("MPS", SharingStrategy::Mps)];
const INTERVALS: &[(&str, TimeSliceInterval)] = &[
    ("Default", TimeSliceInterval::Default),
    ("Short", TimeSliceInterval::Short),
    ("Medium", TimeSliceInterval::Medium),
    ("Long", TimeSliceInterval::Long),
];

#[derive(Clone, Copy)]
enum Kind {
    Gpu,
    Mig,
    Vfio,
}

impl OpaqueConfig {
    /// Decodes `parameters` strictly: `apiVersion` must be [`OPAQUE_CONFIG_API_VERSION`], `kind` one
    /// of `GpuConfig`, `MigDeviceConfig`, `VfioDeviceConfig`, and no field may be unknown.
    pub fn decode(parameters: &Value) -> Result<OpaqueConfig, ConfigError> {
        let top = object(parameters, "parameters")?;
        let api_version = required(top, "", "apiVersion", OPAQUE_CONFIG_API_VERSION)?;
        one_of(api_version, "apiVersion", &[(OPAQUE_CONFIG_API_VERSION, ())])?;
        let kind_names = names(KINDS);
        let kind = one_of(required(top, "", "kind", &kind_names)?, "kind", KINDS)?;
        match kind {
            Kind::Gpu => {
                only_fields(top, "", &["apiVersion", "kind", "sharing"])?;
                let sharing = field(top, "sharing").map(gpu_sharing).transpose()?;
                Ok(OpaqueConfig::GpuConfig(GpuConfig { sharing }))
            }
            Kind::Mig => {
                only_fields(top, "", &["apiVersion", "kind", "sharing"])?;
                let sharing = field(top, "sharing").map(mig_sharing).transpose()?;
                Ok(OpaqueConfig::MigDeviceConfig(MigDeviceConfig { sharing }))
            }
            Kind::Vfio => {
                only_fields(top, "", &["apiVersion", "kind"])?;
                Ok(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {}))
            }
        }
    }

    /// The `kind` as users write it.
    pub fn kind(&self) -> &'static str {
        match self {
            OpaqueConfig::GpuConfig(_) => "GpuConfig",
            OpaqueConfig::MigDeviceConfig(_) => "MigDeviceConfig",
            OpaqueConfig::VfioDeviceConfig(_) => "VfioDeviceConfig",
        }
    }
}

fn gpu_sharing(value: &Value) -> Result<GpuSharing, ConfigError> {
    let sharing = object(value, "sharing")?;
    only_fields(sharing, "sharing", &["strategy", "timeSlicing", "mps"])?;
    let strategy = strategy(sharing, GPU_STRATEGIES)?;
    let time_slicing = field(sharing, "timeSlicing")
        .map(|value| {
            needs_strategy("sharing.timeSlicing", SharingStrategy::TimeSlicing, strategy)?;
            let time_slicing = object(value, "sharing.timeSlicing")?;
            only_fields(time_slicing, "sharing.timeSlicing", &["interval"])?;
            let interval = field(time_slicing, "interval")
                .map(|value| one_of(value, "sharing.timeSlicing.interval", INTERVALS))
                .transpose()?
                .unwrap_or_default();
            Ok(TimeSlicingConfig { interval })
        })
        .transpose()?;
    let mps = mps(sharing, strategy)?;
    Ok(GpuSharing {
        strategy,
        time_slicing,
        mps,
    })
}

fn mig_sharing(value: &Value) -> Result<MigSharing, ConfigError> {
    let sharing = object(value, "sharing")?;
    only_fields(sharing, "sharing", &["strategy", "mps"])?;
    let strategy = strategy(sharing, MIG_STRATEGIES)?;
    let mps = mps(sharing, strategy)?;
    Ok(MigSharing { strategy, mps })
}

fn strategy(sharing: &Map<String, Value>, allowed: &[(&str, SharingStrategy)]) -> Result<SharingStrategy, ConfigError> {
    field(sharing, "strategy")
        .map(|value| one_of(value, "sharing.strategy", allowed))
        .transpose()
        .map(Option::unwrap_or_default)
}

fn mps(sharing: &Map<String, Value>, strategy: SharingStrategy) -> Result<Option<MpsConfig>, ConfigError> {
    let Some(value) = field(sharing, "mps") else {
        return Ok(None);
    };
    needs_strategy("sharing.mps", SharingStrategy::Mps, strategy)?;
    let mps = object(value, "sharing.mps")?;
    only_fields(mps, "sharing.mps", &["defaultActiveThreadPercentage"])?;
    let percentage = field(mps, "defaultActiveThreadPercentage")
        .map(|value| {
            let path = "sharing.mps.defaultActiveThreadPercentage";
            let number = value.as_u64().filter(|n| (1..=100).contains(n));
            match (value, number) {
                (_, Some(number)) => Ok(number as u8),
                (Value::Number(_), None) => Err(ConfigError::InvalidValue {
                    field: path.into(),
                    value: value.to_string(),
                    allowed: "an integer from 1 to 100".into(),
                }),
                _ => Err(wrong_type(path, "an integer from 1 to 100", value)),
            }
        })
        .transpose()?;
    Ok(Some(MpsConfig {
        default_active_thread_percentage: percentage,
    }))
}

fn needs_strategy(path: &str, needs: SharingStrategy, strategy: SharingStrategy) -> Result<(), ConfigError> {
    if needs == strategy {
        return Ok(());
    }
    Err(ConfigError::NotWithStrategy {
        field: path.into(),
        needs: needs.as_str(),
        strategy: strategy.as_str(),
    })
}

/// The field's value, `None` when absent or `null`.
fn field<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.get(name).filter(|value| !value.is_null())
}

fn required<'a>(
    map: &'a Map<String, Value>,
    prefix: &str,
    name: &str,
    allowed: &str,
) -> Result<&'a Value, ConfigError> {
    field(map, name).ok_or_else(|| ConfigError::Missing {
        field: join(prefix, name),
        allowed: allowed.into(),
    })
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ConfigError> {
    value.as_object().ok_or_else(|| wrong_type(path, "an object", value))
}

fn only_fields(map: &Map<String, Value>, prefix: &str, allowed: &[&str]) -> Result<(), ConfigError> {
    match map.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(unknown) => Err(ConfigError::UnknownField {
            field: join(prefix, &shown_key(unknown)),
            allowed: allowed.join(", "),
        }),
        None => Ok(()),
    }
}

fn one_of<T: Copy>(value: &Value, path: &str, options: &[(&str, T)]) -> Result<T, ConfigError> {
    let Some(text) = value.as_str() else {
        return Err(wrong_type(path, "a string", value));
    };
    options
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, option)| *option)
        .ok_or_else(|| ConfigError::InvalidValue {
            field: path.into(),
            value: format!("{text:?}"),
            allowed: names(options),
        })
}

fn names<T>(options: &[(&str, T)]) -> String {
    options.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

fn wrong_type(path: &str, expected: &'static str, got: &Value) -> ConfigError {
    ConfigError::WrongType {
        field: path.into(),
        expected,
        got: got.to_string(),
    }
}

/// A key as the message names it: as written when it looks like a field name, else quoted (an empty
/// key, dots, spaces, control characters) and cut to 64 characters, so the user sees exactly which
/// key and a huge one makes a short message.
fn shown_key(key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let mut chars = key.chars();
    let head: String = chars.by_ref().take(64).collect();
    match (plain, chars.next().is_some()) {
        (true, false) => head,
        (_, false) => format!("{head:?}"),
        (_, true) => format!("{head:?}…"),
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}
