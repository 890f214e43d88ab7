//! The pure DRA core of publication. Work package in progress: see `catalog` for the contract the
//! prepare side relies on.

mod catalog;

pub use catalog::{DeviceCatalog, OfferedDevice};
