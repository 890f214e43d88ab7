//! `capabilities.nvidia.computeTypes`: the numeric formats a card computes in hardware.
//!
//! NVML has no query for this, so it is derived from the CUDA compute capability (more precise
//! than the architecture name: GA100 and GA10x are both "Ampere" but differ). The list is FP64 and
//! FP32 (every CUDA GPU) plus the formats the generation's Tensor Cores accelerate, from NVIDIA's
//! architecture whitepapers:
//!
//! | compute capability | GPUs | Tensor Core formats | source |
//! | --- | --- | --- | --- |
//! | 7.0 | V100 | FP16 | Volta (GV100) whitepaper |
//! | 7.5 | T4, RTX 20 | FP16, INT8, INT4 | Turing whitepaper |
//! | 8.0 | A100, A30 | TF32, BF16, FP16, INT8, INT4 | A100 (GA100) whitepaper |
//! | 8.6, 8.7 | A10, A40, RTX 30, Orin | TF32, BF16, FP16, INT8, INT4 | GA102 whitepaper |
//! | 8.9 | L4, L40, RTX 40 | FP8, TF32, BF16, FP16, INT8, INT4 | Ada (AD102) whitepaper |
//! | 9.0 | H100, H200, GH200 | FP8, TF32, BF16, FP16, INT8 (no INT4) | H100 (GH100) whitepaper |
//!
//! A compute capability not in the table (older, or newer than this code) leaves the field absent:
//! the spec's rule is to omit what cannot be known rather than guess.

use gpu_vendor::ComputeCapability;

/// Formats in a fixed order, widest first, so the list never reorders between reads.
const ORDER: [&str; 8] = ["FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8", "INT4"];

/// The formats of a compute capability, or `None` when the table does not know it.
pub fn compute_types(capability: ComputeCapability) -> Option<Vec<String>> {
    let tensor: &[&str] = match (capability.major, capability.minor) {
        (7, 0) => &["FP16"],
        (7, 5) => &["FP16", "INT8", "INT4"],
        (8, 0) | (8, 6) | (8, 7) => &["TF32", "BF16", "FP16", "INT8", "INT4"],
        (8, 9) => &["FP8", "TF32", "BF16", "FP16", "INT8", "INT4"],
        (9, 0) => &["FP8", "TF32", "BF16", "FP16", "INT8"],
        _ => return None,
    };
    Some(
        ORDER
            .iter()
            .filter(|format| matches!(**format, "FP64" | "FP32") || tensor.contains(format))
            .map(|format| format.to_string())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(major: u32, minor: u32) -> Option<Vec<String>> {
        compute_types(ComputeCapability { major, minor })
    }

    #[test]
    fn ampere_and_hopper_follow_their_whitepapers() {
        assert_eq!(
            types(8, 0).unwrap(),
            ["FP64", "FP32", "TF32", "BF16", "FP16", "INT8", "INT4"]
        );
        assert_eq!(
            types(9, 0).unwrap(),
            ["FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8"],
            "Hopper adds FP8 and drops INT4"
        );
        assert_eq!(types(7, 0).unwrap(), ["FP64", "FP32", "FP16"]);
    }

    #[test]
    fn unknown_generations_leave_the_field_absent() {
        assert_eq!(types(6, 1), None);
        assert_eq!(types(10, 0), None);
    }
}
