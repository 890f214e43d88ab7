//! Health queries: uncorrectable memory error counters, row remapping and the recovery action
//! field, read from the card's state (tests set them through `MockStateFile`).
//!
//! Only uncorrectable counts are modelled; corrected counts read 0. Field values answer
//! `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` and report `NVML_ERROR_NOT_SUPPORTED` per entry for every
//! other field id, as NVML does for fields a card lacks.

use std::os::raw::{c_int, c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
use nvml_wrapper_sys::bindings::*;

use super::{guard, lookup, out};
use crate::rc;
use crate::state::GpuState;

fn card_state(device: nvmlDevice_t) -> Result<GpuState, nvmlReturn_t> {
    let device = lookup::physical_device(device)?;
    let card = device.card().clone();
    device
        .session
        .store
        .read(|state| state.gpu(&card))
        .map_err(super::state_error)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let gpu = card_state(device)?;
        const CORRECTED: nvmlMemoryErrorType_t = nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED;
        const UNCORRECTED: nvmlMemoryErrorType_t = nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED;
        let value = match (error_type, counter_type) {
            (CORRECTED, 0 | 1) => 0,
            (UNCORRECTED, 0) => gpu.uncorrectable_errors_volatile,
            (UNCORRECTED, 1) => gpu.uncorrectable_errors_aggregate,
            _ => return Err(rc::INVALID_ARGUMENT),
        };
        *unsafe { out(count) }? = value;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let rows = card_state(device)?.remapped_rows;
        *unsafe { out(corr_rows) }? = rows.correctable;
        *unsafe { out(unc_rows) }? = rows.uncorrectable;
        *unsafe { out(is_pending) }? = c_uint::from(rows.pending);
        *unsafe { out(failure_occurred) }? = c_uint::from(rows.failure);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    values_count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    guard(|| {
        let gpu = card_state(device)?;
        let count = usize::try_from(values_count).map_err(|_| rc::INVALID_ARGUMENT)?;
        if values.is_null() || count == 0 {
            return Err(rc::INVALID_ARGUMENT);
        }
        // SAFETY: the caller passes `values_count` writable entries (NVML contract).
        let fields = unsafe { std::slice::from_raw_parts_mut(values, count) };
        for field in fields {
            if field.fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION {
                field.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                field.value.uiVal = gpu.recovery_action;
                field.nvmlReturn = rc::SUCCESS;
            } else {
                field.nvmlReturn = rc::NOT_SUPPORTED;
            }
        }
        Ok(())
    })
}
