//! A card's time slice, set through the configured `nvidia-smi`:
//! `nvidia-smi compute-policy -i <card uuid> --set-timeslice <0|1|2|3>`
//! (Default, Short, Medium, Long). Set with the card's first TimeSlicing
//! share and back to Default when its last share leaves.

use gpu_api::opaque_config::TimeSliceInterval;

use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::host_tool::ToolRun;

/// `nvidia-smi`'s number for an interval.
fn timeslice_value(interval: TimeSliceInterval) -> u8 {
    match interval {
        TimeSliceInterval::Default => 0,
        TimeSliceInterval::Short => 1,
        TimeSliceInterval::Medium => 2,
        TimeSliceInterval::Long => 3,
    }
}

/// Sets the time slice of the card with `uuid`.
pub(crate) fn set_time_slice(
    config: &NodePrepareConfig,
    uuid: &str,
    interval: TimeSliceInterval,
) -> Result<(), PrepareError> {
    ToolRun {
        program: &config.nvidia_smi,
        args: vec![
            "compute-policy".into(),
            "-i".into(),
            uuid.into(),
            "--set-timeslice".into(),
            timeslice_value(interval).to_string(),
        ],
        env: Vec::new(),
        stdin: None,
        starts_daemon: false,
    }
    .run(config.tool_timeout)?;
    tracing::info!(card = uuid, ?interval, "set the card's time slice");
    Ok(())
}
