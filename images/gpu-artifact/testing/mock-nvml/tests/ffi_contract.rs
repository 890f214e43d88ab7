//! The mock's C ABI called directly, for NVML behaviour the backend never
//! shows: stale handles, the count protocol, struct version checks.

// Calling C functions through their raw bindings is the point of this test.
#![allow(unsafe_code)]

use std::os::raw::c_uint;
use std::ptr::null_mut;

use mock_nvml::test_support::{MockInstall, machine_fixture};
use nvml_wrapper_sys::bindings::*;

struct Loaded {
    _dir: tempfile::TempDir,
    lib: NvmlLib,
    device: nvmlDevice_t,
}

fn load(fixture: &str) -> Loaded {
    let dir = tempfile::TempDir::new().unwrap();
    let install = MockInstall::new(dir.path(), &machine_fixture(fixture)).unwrap();
    // SAFETY: loading our own mock library.
    let lib = unsafe { NvmlLib::new(install.library_path()) }.unwrap();
    let mut device: nvmlDevice_t = null_mut();
    // SAFETY: valid out-pointers; the mock follows NVML's contract.
    unsafe {
        assert_eq!(lib.nvmlInit_v2(), nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlDeviceGetHandleByIndex_v2(0, &mut device),
            nvmlReturn_enum_NVML_SUCCESS
        );
    }
    Loaded { _dir: dir, lib, device }
}

fn enable_mig(loaded: &Loaded) {
    let mut activation: nvmlReturn_t = 0;
    // SAFETY: valid handle and out-pointer.
    let code = unsafe {
        loaded
            .lib
            .nvmlDeviceSetMigMode(loaded.device, NVML_DEVICE_MIG_ENABLE, &mut activation)
    };
    assert_eq!(
        (code, activation),
        (nvmlReturn_enum_NVML_SUCCESS, nvmlReturn_enum_NVML_SUCCESS)
    );
}

#[test]
fn calls_before_init_are_uninitialized() {
    let dir = tempfile::TempDir::new().unwrap();
    let install = MockInstall::new(dir.path(), &machine_fixture("a30.yaml")).unwrap();
    // SAFETY: loading our own mock library; valid out-pointer.
    unsafe {
        let lib = NvmlLib::new(install.library_path()).unwrap();
        let mut count: c_uint = 0;
        assert_eq!(
            lib.nvmlDeviceGetCount_v2(&mut count),
            nvmlReturn_enum_NVML_ERROR_UNINITIALIZED
        );
    }
}

#[test]
fn a_destroyed_gpu_instance_handle_is_stale() {
    let loaded = load("a100-sxm4-40gb.yaml");
    enable_mig(&loaded);
    let placement = nvmlGpuInstancePlacement_t { start: 0, size: 1 };
    let (mut first, mut second): (nvmlGpuInstance_t, nvmlGpuInstance_t) = (null_mut(), null_mut());
    // SAFETY: valid handles and pointers throughout.
    unsafe {
        let lib = &loaded.lib;
        assert_eq!(
            lib.nvmlDeviceCreateGpuInstanceWithPlacement(loaded.device, 19, &placement, &mut first),
            0
        );
        assert_eq!(lib.nvmlGpuInstanceDestroy(first), nvmlReturn_enum_NVML_SUCCESS);
        // The same profile at the same place gets the same GI id again...
        assert_eq!(
            lib.nvmlDeviceCreateGpuInstanceWithPlacement(loaded.device, 19, &placement, &mut second),
            0
        );
        // ...but the old handle stays stale.
        let mut info: nvmlGpuInstanceInfo_t = std::mem::zeroed();
        assert_eq!(
            lib.nvmlGpuInstanceGetInfo(first, &mut info),
            nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlGpuInstanceDestroy(first),
            nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlGpuInstanceGetInfo(second, &mut info),
            nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!((info.profileId, info.placement.start, info.placement.size), (19, 0, 1));
    }
}

#[test]
fn a_gpu_instance_with_a_compute_instance_is_in_use() {
    let loaded = load("a30.yaml");
    enable_mig(&loaded);
    let placement = nvmlGpuInstancePlacement_t { start: 0, size: 4 };
    let mut gi: nvmlGpuInstance_t = null_mut();
    let mut ci: nvmlComputeInstance_t = null_mut();
    // SAFETY: valid handles and pointers throughout.
    unsafe {
        let lib = &loaded.lib;
        assert_eq!(
            lib.nvmlDeviceCreateGpuInstanceWithPlacement(loaded.device, 0, &placement, &mut gi),
            0
        );
        // NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE spans the 4g.24gb instance.
        assert_eq!(
            lib.nvmlGpuInstanceCreateComputeInstance(gi, 3, &mut ci),
            nvmlReturn_enum_NVML_SUCCESS
        );
        assert_eq!(lib.nvmlGpuInstanceDestroy(gi), nvmlReturn_enum_NVML_ERROR_IN_USE);
        assert_eq!(lib.nvmlComputeInstanceDestroy(ci), nvmlReturn_enum_NVML_SUCCESS);
        assert_eq!(
            lib.nvmlComputeInstanceDestroy(ci),
            nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(lib.nvmlGpuInstanceDestroy(gi), nvmlReturn_enum_NVML_SUCCESS);
    }
}

#[test]
fn profile_info_checks_the_struct_version_and_the_mig_mode() {
    let loaded = load("h100-sxm5-80gb.yaml");
    // SAFETY: valid handles and pointers throughout.
    unsafe {
        let lib = &loaded.lib;
        let mut info: nvmlGpuInstanceProfileInfo_v2_t = std::mem::zeroed();
        info.version = (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as u32) | (2 << 24);
        let v = lib.nvmlDeviceGetGpuInstanceProfileInfoV(loaded.device, 0, &mut info);
        assert_eq!(v, nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED, "V needs MIG enabled");
        let mut v1: nvmlGpuInstanceProfileInfo_t = std::mem::zeroed();
        assert_eq!(lib.nvmlDeviceGetGpuInstanceProfileInfo(loaded.device, 0, &mut v1), 0);
        assert_eq!((v1.id, v1.memorySizeMB, v1.multiprocessorCount), (19, 9984, 16));
        assert_eq!(
            lib.nvmlDeviceGetGpuInstanceProfileInfo(loaded.device, 0x12, &mut v1),
            nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetGpuInstanceProfileInfo(loaded.device, 0x5, &mut v1),
            nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED
        );

        enable_mig(&loaded);
        info.version = 7;
        let bad = lib.nvmlDeviceGetGpuInstanceProfileInfoV(loaded.device, 0, &mut info);
        assert_eq!(bad, nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        let mut v3: nvmlGpuInstanceProfileInfo_v3_t = std::mem::zeroed();
        v3.version = (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v3_t>() as u32) | (3 << 24);
        let ok = lib.nvmlDeviceGetGpuInstanceProfileInfoV(loaded.device, 9, (&raw mut v3).cast());
        assert_eq!(ok, nvmlReturn_enum_NVML_SUCCESS);
        let name = std::ffi::CStr::from_ptr(v3.name.as_ptr()).to_str().unwrap();
        assert_eq!((v3.id, name, v3.memorySizeMB), (15, "1g.20gb", 20096));
    }
}

#[test]
fn count_queries_follow_the_nvml_protocol() {
    let loaded = load("a100-sxm4-40gb.yaml");
    // SAFETY: valid handles and pointers throughout.
    unsafe {
        let lib = &loaded.lib;
        let mut count: c_uint = 0;
        assert_eq!(
            lib.nvmlDeviceGetGpuInstancePossiblePlacements_v2(loaded.device, 19, null_mut(), &mut count),
            0
        );
        assert_eq!(count, 7);
        let mut short = vec![nvmlGpuInstancePlacement_t { start: 0, size: 0 }; 2];
        count = 2;
        let code = lib.nvmlDeviceGetGpuInstancePossiblePlacements_v2(loaded.device, 19, short.as_mut_ptr(), &mut count);
        assert_eq!((code, count), (nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, 7));
        let mut processes: c_uint = 0;
        let none = lib.nvmlDeviceGetComputeRunningProcesses_v3(loaded.device, &mut processes, null_mut());
        assert_eq!((none, processes), (nvmlReturn_enum_NVML_SUCCESS, 0), "an idle card");
    }
}

/// The link state and the remote's bus id (`busId`, NVML's 8-digit domain form).
fn nvlink(loaded: &Loaded, link: c_uint) -> (nvmlReturn_t, nvmlEnableState_t, nvmlReturn_t, String) {
    let mut state: nvmlEnableState_t = 0;
    // SAFETY: valid handle and out-pointers.
    unsafe {
        let active = loaded.lib.nvmlDeviceGetNvLinkState(loaded.device, link, &mut state);
        let mut pci: nvmlPciInfo_t = std::mem::zeroed();
        let remote = loaded
            .lib
            .nvmlDeviceGetNvLinkRemotePciInfo_v2(loaded.device, link, &mut pci);
        let bus_id = std::ffi::CStr::from_ptr(pci.busId.as_ptr())
            .to_string_lossy()
            .into_owned();
        (active, state, remote, bus_id)
    }
}

#[test]
fn nvlink_links_follow_the_board_and_the_model() {
    const OK: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
    const BAD_LINK: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    const ON: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_ENABLED;
    const OFF: nvmlEnableState_t = nvmlEnableState_enum_NVML_FEATURE_DISABLED;
    // HGX H100: links 0-4 reach the first NVSwitch, 14-17 the last; an H100 has 18 links.
    let hgx = load("h100-sxm5-80gb-x8.yaml");
    assert_eq!(nvlink(&hgx, 0), (OK, ON, OK, "00000000:05:00.0".into()));
    assert_eq!(nvlink(&hgx, 5), (OK, ON, OK, "00000000:06:00.0".into()));
    assert_eq!(nvlink(&hgx, 17), (OK, ON, OK, "00000000:08:00.0".into()));
    assert_eq!(nvlink(&hgx, NVML_NVLINK_MAX_LINKS).0, BAD_LINK);
    // An A30 without a bridge: its four links are inactive, with no remote end; a fifth is no link.
    let a30 = load("a30.yaml");
    assert_eq!(nvlink(&a30, 3), (OK, OFF, BAD_LINK, String::new()));
    assert_eq!(nvlink(&a30, 4).0, BAD_LINK);
    // A MIG device has no links of its own.
    enable_mig(&a30);
    let placement = nvmlGpuInstancePlacement_t { start: 0, size: 4 };
    let (mut gi, mut ci, mut mig): (nvmlGpuInstance_t, nvmlComputeInstance_t, nvmlDevice_t) =
        (null_mut(), null_mut(), null_mut());
    let mut state: nvmlEnableState_t = 0;
    // SAFETY: valid handles and pointers throughout.
    unsafe {
        let lib = &a30.lib;
        assert_eq!(
            lib.nvmlDeviceCreateGpuInstanceWithPlacement(a30.device, 0, &placement, &mut gi),
            OK
        );
        assert_eq!(lib.nvmlGpuInstanceCreateComputeInstance(gi, 3, &mut ci), OK);
        assert_eq!(lib.nvmlDeviceGetMigDeviceHandleByIndex(a30.device, 0, &mut mig), OK);
        assert_eq!(
            lib.nvmlDeviceGetNvLinkState(mig, 0, &mut state),
            nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED
        );
    }
}

#[test]
fn a_link_to_nowhere_is_refused_when_the_machine_is_read() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("node.yaml");
    let a30 = machine_fixture("a30.yaml");
    let yaml = format!(
        "include: [{}]\ngpus:\n  - {{ pciBusId: \"0000:01:00.0\", model: a30-24gb, uuid: \"GPU-a\", nvlinks: [{{ remote: \"0000:02:00.0\", links: 4 }}] }}\n",
        a30.display()
    );
    std::fs::write(&path, yaml).unwrap();
    let error = mock_nvml::machine::Machine::load(&path).unwrap_err();
    assert!(error.contains("neither another GPU nor an NVSwitch"), "{error}");
    let five = std::fs::read_to_string(&path).unwrap().replace("links: 4", "links: 5");
    std::fs::write(&path, five).unwrap();
    let error = mock_nvml::machine::Machine::load(&path).unwrap_err();
    assert!(error.contains("lists 5 NVLink links, its model has 4"), "{error}");
}
