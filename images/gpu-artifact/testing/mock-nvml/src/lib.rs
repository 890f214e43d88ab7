//! A mock libnvidia-ml.so.1 with real NVML C signatures, return codes and MIG semantics, driven by a machine-description file and persisting its state in a file. Test-only.
