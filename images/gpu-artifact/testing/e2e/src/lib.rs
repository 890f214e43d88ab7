//! The end-to-end suite lives in `tests/`: each file drives the real control plane (and, as the
//! product grows, our components) and asserts on what the API server stored. `make test` runs it
//! once against Kubernetes 1.34 and once against the newest release.
