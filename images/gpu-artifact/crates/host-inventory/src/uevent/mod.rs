//! Kernel uevents: parsing NETLINK_KOBJECT_UEVENT payloads into typed
//! events, and the streams of PCI events the node agent reacts to.

mod message;
mod source;

pub use message::{PciId, UEvent, UEventAction, UEventError, parse};
pub use source::{KernelUEventSocket, PciUEvents, UEventInjector, UEventSourceError, injected, listen, pci_events};
