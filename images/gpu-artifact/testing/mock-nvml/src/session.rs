//! The loaded mock: its machine description and state file, between
//! `nvmlInit` and the matching `nvmlShutdown`.
//!
//! Where the files are: `mock-nvml-machine.yaml` beside the loaded library
//! (with state in `mock-nvml-state.json` there) wins, so that tests in one
//! process can each load their own copy of the library with their own
//! machine; otherwise `MOCK_NVML_MACHINE` and `MOCK_NVML_STATE` name them.

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nvml_wrapper_sys::bindings::nvmlReturn_t;

use crate::machine::{Card, Machine};
use crate::rc;
use crate::state::StateStore;

pub const MACHINE_FILE_NAME: &str = "mock-nvml-machine.yaml";
pub const STATE_FILE_NAME: &str = "mock-nvml-state.json";
pub const MACHINE_ENV: &str = "MOCK_NVML_MACHINE";
pub const STATE_ENV: &str = "MOCK_NVML_STATE";

pub struct Session {
    pub machine: Machine,
    pub store: StateStore,
}

impl Session {
    pub fn card(&self, index: usize) -> Result<&Card, nvmlReturn_t> {
        self.machine.cards.get(index).ok_or(rc::INVALID_ARGUMENT)
    }
}

struct Global {
    session: Option<Arc<Session>>,
    /// NVML counts `nvmlInit` calls; only the last `nvmlShutdown` unloads.
    init_count: u32,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    session: None,
    init_count: 0,
});

fn global() -> std::sync::MutexGuard<'static, Global> {
    GLOBAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn init() -> nvmlReturn_t {
    let mut global = global();
    if global.session.is_some() {
        global.init_count += 1;
        return rc::SUCCESS;
    }
    let session = match open_session() {
        Ok(session) => session,
        Err(message) => {
            eprintln!("mock libnvidia-ml: {message}");
            return rc::UNKNOWN;
        }
    };
    if !session.machine.driver_loaded {
        return rc::DRIVER_NOT_LOADED;
    }
    global.session = Some(Arc::new(session));
    global.init_count = 1;
    rc::SUCCESS
}

pub fn shutdown() -> nvmlReturn_t {
    let mut global = global();
    if global.session.is_none() {
        return rc::UNINITIALIZED;
    }
    global.init_count -= 1;
    if global.init_count == 0 {
        global.session = None;
    }
    rc::SUCCESS
}

/// The session, or `NVML_ERROR_UNINITIALIZED` before `nvmlInit`.
pub fn current() -> Result<Arc<Session>, nvmlReturn_t> {
    global().session.clone().ok_or(rc::UNINITIALIZED)
}

fn open_session() -> Result<Session, String> {
    let (machine_path, state_path) = locate_files()?;
    let mut machine = Machine::load(&machine_path)?;
    machine.retain_visible_cards();
    Ok(Session {
        machine,
        store: StateStore::new(state_path),
    })
}

fn locate_files() -> Result<(PathBuf, PathBuf), String> {
    if let Some(dir) = library_dir() {
        let machine = dir.join(MACHINE_FILE_NAME);
        if machine.is_file() {
            return Ok((machine, dir.join(STATE_FILE_NAME)));
        }
    }
    let machine = std::env::var_os(MACHINE_ENV).ok_or_else(|| {
        format!("no machine description: set {MACHINE_ENV} or put {MACHINE_FILE_NAME} beside the library")
    })?;
    let state = std::env::var_os(STATE_ENV).ok_or_else(|| format!("no state file: set {STATE_ENV}"))?;
    Ok((PathBuf::from(machine), PathBuf::from(state)))
}

/// The directory of the file this code was loaded from (the copy of the
/// library a test installed), found through `dladdr`.
fn library_dir() -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    let address = library_dir as fn() -> Option<PathBuf> as *const libc::c_void;
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let found = unsafe { libc::dladdr(address, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let file = unsafe { CStr::from_ptr(info.dli_fname) };
    // Not canonicalized: a symlinked library must find the files beside the
    // link, where the test put them.
    PathBuf::from(file.to_str().ok()?).parent().map(PathBuf::from)
}
