//! `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`: how much device memory an MPS client may allocate on each
//! card, set from the `memory` a share asked for and the kube-scheduler counted against the card.
//!
//! NVIDIA's MPS documentation, "Appendix: Environment Variables", `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`
//! (<https://docs.nvidia.com/deploy/mps/latest/appendix-environment-variables.html>): a client's
//! variable limits the device memory its CUDA allocations may pin on each device, and only narrows
//! a limit the control daemon set. Its value is a comma-separated list of `<device>=<limit>`, the
//! device named as `CUDA_VISIBLE_DEVICES` names one (an ordinal or a UUID); the limit is an integer
//! with the qualifier `M` (megabytes) or `G` (gigabytes), e.g. `0=1G,1=512M` (the same form as the
//! daemon's `set_default_device_pinned_mem_limit`, nvidia-cuda-mps-control(1)).
//!
//! - The card is named by its UUID, never an ordinal: a client's ordinals are the devices it sees
//!   after `NVIDIA_VISIBLE_DEVICES` (the container's cards), `CUDA_VISIBLE_DEVICES` (which the MPS
//!   server remaps, the same page) and `CUDA_DEVICE_ORDER`, none of which the node decides; NVIDIA
//!   recommends UUIDs for exactly that ambiguity (the page's `CUDA_VISIBLE_DEVICES` section).
//! - The limit is in `M`, which MPS counts in MiB (NVIDIA's DRA driver writes a Quantity as
//!   `bytes / 1024 / 1024` followed by `M`, `api/nvidia.com/resource/v1beta1/sharing.go`). The
//!   shared offer's policy counts `memory` in steps of 1 MiB, so `4Gi` is `4096M` exactly; a
//!   fraction of a MiB (which that policy never writes) is rounded down, never past the request.
//! - The variable is the claim's, like `NVIDIA_VISIBLE_DEVICES` ([`crate::cdi_spec`]): the runtime
//!   keeps the last CDI `env` entry of a name, so one variable names every MPS share of the claim,
//!   and two shares of one card add up.

/// The variable's name.
pub(crate) const PINNED_DEVICE_MEM_LIMIT: &str = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";

const MIB: u64 = 1 << 20;

/// The limit of a share that consumed `bytes` of memory, in whole MiB; the reason when it is under
/// 1 MiB, the least MPS can express (a share that asked for none has no limit and is not asked).
pub(crate) fn limit_mib(bytes: u64) -> Result<u64, String> {
    match bytes / MIB {
        0 => Err(format!(
            "it consumed {bytes} bytes of memory, less than 1 MiB, the smallest limit MPS accepts \
             ({PINNED_DEVICE_MEM_LIMIT})"
        )),
        mib => Ok(mib),
    }
}

/// The one `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<uuid>=<MiB>M,...` for the claim's MPS shares that
/// asked for memory, as `(card UUID, MiB)` in the claim's order; none when no share asked.
pub(crate) fn env(limits: &[(String, u64)]) -> Option<String> {
    let mut per_card: Vec<(&str, u64)> = Vec::new();
    for (uuid, mib) in limits {
        match per_card.iter_mut().find(|(card, _)| card == uuid) {
            Some((_, total)) => *total += mib,
            None => per_card.push((uuid, *mib)),
        }
    }
    if per_card.is_empty() {
        return None;
    }
    let value: Vec<String> = per_card.iter().map(|(uuid, mib)| format!("{uuid}={mib}M")).collect();
    Some(format!("{PINNED_DEVICE_MEM_LIMIT}={}", value.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_the_memory_in_whole_mib_and_refused_under_one() {
        assert_eq!(limit_mib(4 << 30), Ok(4096));
        assert_eq!(limit_mib(MIB), Ok(1));
        assert_eq!(limit_mib(MIB + MIB / 2), Ok(1), "rounded down, never past the request");
        let error = limit_mib(MIB - 1).unwrap_err();
        assert!(error.contains("less than 1 MiB"), "{error}");
    }

    #[test]
    fn one_variable_names_every_card_and_adds_up_shares_of_one_card() {
        assert_eq!(env(&[]), None);
        let limits = [
            ("GPU-b".to_owned(), 4096),
            ("GPU-a".to_owned(), 1024),
            ("GPU-b".to_owned(), 512),
        ];
        assert_eq!(
            env(&limits).as_deref(),
            Some("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=GPU-b=4608M,GPU-a=1024M")
        );
    }
}
