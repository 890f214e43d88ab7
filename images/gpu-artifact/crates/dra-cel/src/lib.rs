//! The Kubernetes DRA CEL environment (device.driver, attributes and capacity by domain, quantity and semver libraries, string and list extensions, cost limit) with a compile cache. Pure: no I/O.
