//! Stand-ins for the NVIDIA driver's tools that the real node's driver root carries
//! (`usr/bin/nvidia-smi`, `usr/bin/nvidia-cuda-mps-control`). They go through the same interfaces the
//! real tools do: `nvidia-smi` asks NVML (the driver root's `libnvidia-ml.so.1`, loaded by
//! nvml-wrapper), so a container sees exactly what its device nodes give it; the MPS control daemon
//! talks over a named pipe in `CUDA_MPS_PIPE_DIRECTORY` and keeps its shared memory in `/dev/shm`.
//! Test-only.

pub mod gpu_list;
pub mod mps;
