//! The test bed's real node (`tools/testbed/node-up.sh`): a kubelet, containerd and runc in network,
//! mount and PID namespaces of their own, on the fixture host this crate lays out ([`host`]), with the
//! kernel behaviour it emulates ([`host::run_kernel`], [`proc_hook`]); the module operator that
//! installs the module's chart as Deckhouse does ([`operator`]); and the handle tests use ([`node`]),
//! with the node's files as the node sees them ([`node_files`]).
//! Test-only.

pub mod host;
pub mod module_status;
pub mod node;
pub mod node_files;
pub mod operator;
pub mod proc_hook;
pub mod process_maps;
