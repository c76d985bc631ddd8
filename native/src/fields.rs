//! `bronze.events.fields` of the events whose fields are the default `Event.fields` walk (GTID,
//! XID, QUERY, ...): `compact_json(event.fields())` written straight from the event's slots.
//!
//! None, bools, strings and ints are written here as the C JSON encoder writes them; any other
//! value (nested dicts, GTID sets, bytes, floats, subclasses) goes through the Python
//! `compact_json(to_json_value(value))`, the very text the encoder embeds for it. Any surprise
//! makes `fields_json` answer None and the caller encodes `fields()` in Python.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::render::{exact_int, push_json_str};
use crate::SlotLayout;

/// One event class: its slots and its fields' names as JSON keys.
#[pyclass(frozen, module = "binlog_parser._native_ext")]
pub struct FieldsLayout {
    /// every dataclass field, the header first
    slots: SlotLayout,
    /// `"name":` of each field after the header
    keys_json: Vec<String>,
    /// `value -> compact_json(to_json_value(value))`
    fallback: Py<PyAny>,
}

#[pymethods]
impl FieldsLayout {
    /// `keys_json`: the fields after the header, in `dataclasses.fields` order, each as the
    /// JSON encoder writes it with its colon.
    #[new]
    fn new(py: Python<'_>, cls: Bound<'_, PyType>, keys_json: Vec<String>, fallback: Py<PyAny>) -> PyResult<Self> {
        let n = keys_json.len() + 1;
        let slots = SlotLayout::new(py, &cls, n)?;
        if slots.offsets.len() != n {
            return Err(PyValueError::new_err("the header and the fields' keys"));
        }
        Ok(FieldsLayout { slots, keys_json, fallback })
    }
}

/// `compact_json(event.fields())` of an instance of the layout's class, or None.
#[pyfunction]
pub fn fields_json<'py>(py: Python<'py>, event: &Bound<'py, PyAny>, layout: &Bound<'py, FieldsLayout>) -> Option<Bound<'py, PyString>> {
    let run = std::panic::AssertUnwindSafe(|| fields_inner(py, event, layout.get()));
    match std::panic::catch_unwind(run) {
        Ok(Ok(Some(s))) => Some(PyString::new(py, &s)),
        _ => {
            // SAFETY: drop any pending Python error: the caller encodes the fields itself
            unsafe { ffi::PyErr_Clear() };
            None
        }
    }
}

fn fields_inner(py: Python<'_>, event: &Bound<'_, PyAny>, layout: &FieldsLayout) -> PyResult<Option<String>> {
    if event.get_type().as_ptr() != layout.slots.cls.as_ptr() {
        return Ok(None);
    }
    let mut out = String::with_capacity(256);
    out.push('{');
    let base = event.as_ptr() as *mut u8;
    for (k, (off, key)) in layout.slots.offsets[1..].iter().zip(&layout.keys_json).enumerate() {
        // SAFETY: the event is an instance of the layout's class (checked above), whose slot at
        // `off` holds a PyObject* (checked when the layout was built) or NULL
        let p = unsafe { *(base.offset(*off) as *const *mut ffi::PyObject) };
        if p.is_null() {
            return Ok(None);
        }
        if k > 0 {
            out.push(',');
        }
        out.push_str(key);
        // SAFETY: type checks and UTF-8 access on a live object
        unsafe {
            if p == ffi::Py_None() {
                out.push_str("null");
                continue;
            }
            if p == ffi::Py_True() {
                out.push_str("true");
                continue;
            }
            if p == ffi::Py_False() {
                out.push_str("false");
                continue;
            }
            if ffi::PyUnicode_CheckExact(p) != 0 {
                let mut size: ffi::Py_ssize_t = 0;
                let data = ffi::PyUnicode_AsUTF8AndSize(p, &mut size);
                if !data.is_null() {
                    push_json_str(&mut out, std::str::from_utf8_unchecked(std::slice::from_raw_parts(data as *const u8, size as usize)));
                    continue;
                }
                ffi::PyErr_Clear();
            } else if let Some(n) = exact_int(p) {
                out.push_str(&n.to_string());
                continue;
            }
        }
        // SAFETY: a borrowed slot value, kept alive by the event
        let value = unsafe { Bound::from_borrowed_ptr(py, p) };
        let text = layout.fallback.bind(py).call1((value,))?;
        out.push_str(text.cast::<PyString>()?.to_str()?);
    }
    out.push('}');
    Ok(Some(out))
}
