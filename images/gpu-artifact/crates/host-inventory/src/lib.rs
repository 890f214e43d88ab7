//! Reads a node's GPUs and host facts from sysfs, pci.ids, os-release and DMI under one configurable root; parses kernel uevents. Never talks to Kubernetes or NVML.
