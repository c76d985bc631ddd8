//! `bronze.events.fields` of the events whose fields are the default `Event.fields` walk (GTID,
//! XID, QUERY, ...): `compact_json(event.fields())` written straight from the event's slots.
//!
//! None, bools, strings, ints, bytes (as `to_json_value`'s hex) and dicts (str keys), lists and
//! tuples of them are written here as `to_json_value` and the C JSON encoder write them; any
//! other value (GTID sets, floats, subclasses, ...) goes through the Python
//! `compact_json(to_json_value(value))`, the very text the encoder embeds for it. Any surprise
//! makes `fields_json` answer None and the caller encodes `fields()` in Python.


use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyType};

use crate::digits::{push_hex, push_int};
use crate::render::{exact_int, push_json_str, slot, str_utf8};
use crate::short_copy::append_str;
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

/// `compact_json(event.fields())` as `fields_json` makes it, as Rust text (None: the caller
/// encodes the fields itself); for callers that catch panics themselves (`sink::EventSink`).
pub(crate) fn fields_text(py: Python<'_>, event: &Bound<'_, PyAny>, layout: &FieldsLayout) -> Option<String> {
    fields_inner(py, event, layout).ok().flatten()
}

impl FieldsLayout {
    /// `"name":` of each field after the header, in order.
    pub(crate) fn keys_json(&self) -> &[String] {
        &self.keys_json
    }
}

fn fields_inner(py: Python<'_>, event: &Bound<'_, PyAny>, layout: &FieldsLayout) -> PyResult<Option<String>> {
    if event.get_type().as_ptr() != layout.slots.cls.as_ptr() {
        return Ok(None);
    }
    let mut out = String::with_capacity(256);
    out.push('{');
    let fallback = layout.fallback.bind(py);
    for (k, (off, key)) in layout.slots.offsets[1..].iter().zip(&layout.keys_json).enumerate() {
        // SAFETY: the event is an instance of the layout's class (checked above)
        let p = unsafe { slot(event, *off) };
        if p.is_null() {
            return Ok(None);
        }
        if k > 0 {
            out.push(',');
        }
        append_str(&mut out, key);
        // SAFETY: a borrowed slot value, kept alive by the event
        push_value(py, &mut out, unsafe { &Bound::from_borrowed_ptr(py, p) }, fallback, 0)?;
    }
    out.push('}');
    Ok(Some(out))
}

/// Nesting the walk follows before it hands a value to the Python encoder.
const MAX_DEPTH: u32 = 16;

/// `compact_json(to_json_value(value))` appended: None, bools, exact strs and ints, bytes (as
/// hex), and exact dicts with str keys, lists and tuples of such values here; anything else
/// by `fallback`.
fn push_value(py: Python<'_>, out: &mut String, v: &Bound<'_, PyAny>, fallback: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
    let p = v.as_ptr();
    // SAFETY: type checks and buffer access on a live object
    unsafe {
        if p == ffi::Py_None() {
            out.push_str("null");
            return Ok(());
        }
        if p == ffi::Py_True() {
            out.push_str("true");
            return Ok(());
        }
        if p == ffi::Py_False() {
            out.push_str("false");
            return Ok(());
        }
        if ffi::PyUnicode_CheckExact(p) != 0 {
            if let Some(s) = str_utf8(p) {
                push_json_str(out, s);
                return Ok(());
            }
        } else if ffi::PyLong_CheckExact(p) != 0 {
            if let Some(n) = exact_int(p) {
                push_int(out, n);
                return Ok(());
            }
        } else if ffi::PyBytes_CheckExact(p) != 0 {
            let raw = v.cast::<PyBytes>()?.as_bytes();
            out.push('"');
            push_hex(out, raw);
            out.push('"');
            return Ok(());
        } else if depth < MAX_DEPTH && ffi::PyDict_CheckExact(p) != 0 {
            let d = v.cast::<PyDict>()?;
            if d.keys().iter().all(|k| k.is_exact_instance_of::<PyString>()) {
                let mark = out.len();
                out.push('{');
                for (i, (key, value)) in d.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let Ok(s) = key.cast::<PyString>()?.to_str() else {
                        out.truncate(mark); // a lone surrogate in a key: the encoder
                        return push_fallback(out, v, fallback);
                    };
                    push_json_str(out, s);
                    out.push(':');
                    push_value(py, out, &value, fallback, depth + 1)?;
                }
                out.push('}');
                return Ok(());
            }
        } else if depth < MAX_DEPTH && (ffi::PyTuple_CheckExact(p) != 0 || ffi::PyList_CheckExact(p) != 0) {
            out.push('[');
            for (i, item) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(py, out, &item?, fallback, depth + 1)?;
            }
            out.push(']');
            return Ok(());
        }
    }
    push_fallback(out, v, fallback)
}

fn push_fallback(out: &mut String, v: &Bound<'_, PyAny>, fallback: &Bound<'_, PyAny>) -> PyResult<()> {
    let text = fallback.call1((v,))?;
    out.push_str(text.cast::<PyString>()?.to_str()?);
    Ok(())
}
