//! Row images rendered as the ingest stores them: `render.ImageRenderer.render_changes_into`
//! compiled.
//!
//! For each image (a dict of column name -> typed value, as either decoder builds it) the
//! compact JSON text of `render_row` (what `silver.row_changes.before` / `after` hold), in one pass: strings, ints,
//! bools, bytes, DECIMALs and the temporal dataclasses here; any other value (floats, JSON
//! documents, geometry, vectors, partial JSON, subclasses, anything unusual) through the Python
//! `render._pair_any`, so every value is rendered by the reference code or by a port that
//! `tests/test_native_render.py` holds equal to it.
//!
//! Nothing fails here: any surprise (an image whose columns are not the layout's, an int out of
//! range, a Python error) makes `render_changes_into` answer None, with the lists it appends to
//! as they were, and the caller renders the event in Python, which raises the exact error if
//! there is one.

use std::fmt::Write as _;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::columns::{ImageColumns, NoText, Overflow, Utf8Builder};
use crate::digits::{push_hex, push_int, push_padded, two_digits};
use crate::short_copy::append_str;
use crate::{
    date_fields, datetime2_fields, frac_bytes, push_decimal, le, time2_fields, timestamp2_fields, Col, Conv,
    EventBytes, ImageReader, RowImages, SlotLayout, ValueTypes,
};

/// JSON numbers beyond +-2**53 are written as strings (`render.render_value`).
const MAX_SAFE: i64 = 1 << 53;

/// How one column's values are rendered, from its `Column` (see `render.ImageRenderer._native_layout`).
struct RenderCol {
    /// YEAR: ints as `%04d`, quoted in JSON
    year: bool,
    /// DECIMAL's scale (None: the column has none; the Python renderer decides)
    scale: Option<usize>,
    /// bytes as `0x` + hex (a binary column or one of known charset), else UTF-8 when valid
    bytes_hex: bool,
    /// the `Column` (or None) handed to `_pair_any`
    column: Py<PyAny>,
}

/// The columns of one image layout: the names (in image order) and how to render each.
#[pyclass(frozen, module = "binlog_parser._native_ext")]
pub struct ImageLayout {
    types: Py<ValueTypes>,
    names: Vec<Py<PyString>>,
    /// each name as the JSON encoder writes it, with its colon: `"name":`
    keys_json: Vec<String>,
    cols: Vec<RenderCol>,
    /// `render._pair_any(value, column) -> (json, text)`
    pair_any: Py<PyAny>,
}

#[pymethods]
impl ImageLayout {
    /// `specs`: one `(name, key_json, year, scale or -1, bytes_hex, column)` per column.
    #[new]
    fn new(types: Py<ValueTypes>, specs: Vec<Bound<'_, PyTuple>>, pair_any: Py<PyAny>) -> PyResult<Self> {
        let mut names: Vec<Py<PyString>> = Vec::with_capacity(specs.len());
        let mut keys_json = Vec::with_capacity(specs.len());
        let mut cols = Vec::with_capacity(specs.len());
        for s in &specs {
            if s.len() != 6 {
                return Err(PyValueError::new_err("a render spec has 6 items"));
            }
            names.push(s.get_item(0)?.cast_into::<PyString>()?.unbind());
            keys_json.push(s.get_item(1)?.extract::<String>()?);
            let scale: i64 = s.get_item(3)?.extract()?;
            cols.push(RenderCol {
                year: s.get_item(2)?.extract()?,
                scale: usize::try_from(scale).ok(),
                bytes_hex: s.get_item(4)?.extract()?,
                column: s.get_item(5)?.unbind(),
            });
        }
        Ok(ImageLayout { types, names, keys_json, cols, pair_any })
    }
}

/// Why a value or an image is left to the Python renderer.
pub(crate) struct Fallback;

impl From<PyErr> for Fallback {
    fn from(_: PyErr) -> Self {
        Fallback
    }
}

impl From<Overflow> for Fallback {
    fn from(_: Overflow) -> Self {
        Fallback
    }
}

/// `json.encoder.encode_basestring` (the C encoder, `ensure_ascii=False`): quotes, backslash
/// and the control characters escaped, everything else as it is.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // eight bytes at a time while none of them is escaped (most text has none)
        while let Some(word) = bytes.get(i..i + 8) {
            if may_need_escape(u64::from_le_bytes(word.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        let Some(&b) = bytes.get(i) else { break };
        i += 1;
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        append_str(out, &s[start..i - 1]);
        if short.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(short);
        }
        start = i;
    }
    append_str(out, &s[start..]);
    out.push('"');
}

/// Whether any of the eight bytes of `word` may be one `push_json_str` escapes (a control
/// character, `"` or `\`): never false when one is. The bytes of multi-byte characters (0x80
/// and up) never make it true.
#[inline(always)]
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // a byte below n (n <= 0x80) leaves its high bit set in (w - n * ONES) & !w
    let below = |w: u64, n: u64| w.wrapping_sub(n * ONES) & !w & HIGH != 0;
    below(word, 0x20) || below(word ^ (u64::from(b'"') * ONES), 1) || below(word ^ (u64::from(b'\\') * ONES), 1)
}

/// The UTF-8 text of an exact `str` (None: not valid UTF-8, i.e. lone surrogates; the Python
/// encoder's business). The text lives as long as the object (CPython caches it on the str).
///
/// # Safety
/// `p` is a live exact `str`.
pub(crate) unsafe fn str_utf8<'a>(p: *mut ffi::PyObject) -> Option<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(p, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(data as *const u8, size as usize)))
}

/// The object in the slot at `offset` of a slots instance (NULL when unset).
///
/// # Safety
/// `obj` is an instance of a class whose `SlotLayout` gave `offset` (a PyObject* slot).
pub(crate) unsafe fn slot(obj: &Bound<'_, PyAny>, offset: ffi::Py_ssize_t) -> *mut ffi::PyObject {
    *((obj.as_ptr() as *mut u8).offset(offset) as *const *mut ffi::PyObject)
}

/// `temporal._frac`: "" for fsp <= 0, else "." and the first `fsp` characters of `%06d`.
fn push_frac(out: &mut String, usec: i64, fsp: i64) {
    if fsp <= 0 {
        return;
    }
    // the six digits, then cut to `fsp` of them
    out.push('.');
    let start = out.len();
    push_padded(out, usec, 6);
    out.truncate(start + (out.len() - start).min(fsp as usize));
}

/// `%04d-%02d-%02d` and, with a time, ` %02d:%02d:%02d` (`temporal.py`'s `__str__`).
/// A date and time whose fields fit their widths (all but damaged values) are written into a
/// fixed buffer and appended in one copy: temporal columns are much of a row's rendering.
fn push_date_time(out: &mut String, [y, mo, d]: [i64; 3], time: Option<[i64; 3]>) {
    let fits = |v: i64| (0..100).contains(&v);
    if (0..10_000).contains(&y) && fits(mo) && fits(d) {
        let mut text = *b"0000-00-00 00:00:00";
        let [y, mo, d] = [y as usize, mo as usize, d as usize];
        text[0..2].copy_from_slice(&two_digits(y / 100));
        text[2..4].copy_from_slice(&two_digits(y % 100));
        text[5..7].copy_from_slice(&two_digits(mo));
        text[8..10].copy_from_slice(&two_digits(d));
        let written = match time {
            None => 10,
            Some([h, mi, sec]) if fits(h) && fits(mi) && fits(sec) => {
                text[11..13].copy_from_slice(&two_digits(h as usize));
                text[14..16].copy_from_slice(&two_digits(mi as usize));
                text[17..19].copy_from_slice(&two_digits(sec as usize));
                19
            }
            Some(_) => 0,
        };
        if written > 0 {
            // SAFETY: ASCII digits and separators only
            out.push_str(unsafe { std::str::from_utf8_unchecked(&text[..written]) });
            return;
        }
    }
    push_padded(out, y, 4);
    out.push('-');
    push_padded(out, mo, 2);
    out.push('-');
    push_padded(out, d, 2);
    if let Some(hms) = time {
        out.push(' ');
        push_hms(out, hms);
    }
}

/// `%02d:%02d:%02d`.
fn push_hms(out: &mut String, [h, mi, sec]: [i64; 3]) {
    push_padded(out, h, 2);
    out.push(':');
    push_padded(out, mi, 2);
    out.push(':');
    push_padded(out, sec, 2);
}

/// `str()` of a `temporal.DateTime` of these fields.
fn datetime_text(fields: [i64; 8]) -> String {
    let mut s = String::with_capacity(26);
    push_datetime(&mut s, fields);
    s
}

/// `datetime_text` appended to `out`.
fn push_datetime(out: &mut String, [y, mo, d, h, mi, sec, us, fsp]: [i64; 8]) {
    push_date_time(out, [y, mo, d], Some([h, mi, sec]));
    push_frac(out, us, fsp);
}

/// `str()` of a `temporal.Timestamp` of these fields, or None beyond `datetime`'s years
/// (1..9999), where the Python renderer raises.
fn timestamp_text(fields: [i64; 3]) -> Option<String> {
    let mut s = String::with_capacity(26);
    push_timestamp(&mut s, fields).then_some(s)
}

/// `timestamp_text` appended to `out` (false, nothing appended: beyond `datetime`'s years).
fn push_timestamp(out: &mut String, [seconds, us, fsp]: [i64; 3]) -> bool {
    if seconds == 0 && us == 0 {
        out.push_str("0000-00-00 00:00:00");
        push_frac(out, 0, fsp);
        return true;
    }
    if !(-62_135_596_800..=253_402_300_799).contains(&seconds) {
        return false;
    }
    let (days, secs) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, mo, d) = civil_from_days(days);
    push_date_time(out, [y, mo, d], Some([secs / 3600, secs / 60 % 60, secs % 60]));
    push_frac(out, us, fsp);
    true
}

/// `str()` of a `temporal.Time` of these fields.
fn time_text(neg: bool, fields: [i64; 5]) -> String {
    let mut s = String::with_capacity(20);
    push_time(&mut s, neg, fields);
    s
}

/// `time_text` appended to `out`.
fn push_time(out: &mut String, neg: bool, [h, mi, sec, us, fsp]: [i64; 5]) {
    if neg {
        out.push('-');
    }
    push_hms(out, [h, mi, sec]);
    push_frac(out, us, fsp);
}

/// A value whose JSON is its text quoted (temporals, DECIMALs).
fn emit_quoted(s: &str, json: &mut String, text: &mut NoText) -> Result<(), Fallback> {
    json.push('"');
    append_str(json, s);
    json.push('"');
    Ok(text.push(s.as_bytes())?)
}

/// `emit_quoted` of the text `write` appends to `json` (false: it appended none, and this
/// writes nothing either). No `String` per value: the text is written once, into the JSON.
fn emit_quoted_with(json: &mut String, text: &mut NoText, write: impl FnOnce(&mut String) -> bool)
                    -> Result<bool, Fallback> {
    json.push('"');
    let start = json.len();
    if !write(json) {
        json.truncate(start - 1);
        return Ok(false);
    }
    text.push(&json.as_bytes()[start..])?;
    json.push('"');
    Ok(true)
}

/// A text value: a JSON string, and itself.
fn emit_str(s: &str, json: &mut String, text: &mut NoText) -> Result<(), Fallback> {
    push_json_str(json, s);
    Ok(text.push(s.as_bytes())?)
}

/// An integer: `%04d` and quoted for YEAR, a JSON string beyond +-2**53, else a number.
fn emit_int(col: &RenderCol, n: i64, json: &mut String, text: &mut NoText) -> Result<(), Fallback> {
    if !col.year && (-MAX_SAFE..=MAX_SAFE).contains(&n) {
        // a JSON number: its digits are the text
        let start = json.len();
        push_int(json, n);
        return Ok(text.push(&json.as_bytes()[start..])?);
    }
    let mut s = String::with_capacity(20);
    if col.year {
        push_padded(&mut s, n, 4);
    } else {
        push_int(&mut s, n);
    }
    if col.year || !(-MAX_SAFE..=MAX_SAFE).contains(&n) {
        return emit_quoted(&s, json, text);
    }
    append_str(json, &s);
    Ok(text.push(s.as_bytes())?)
}

/// The text `str(Decimal(s))` gives back as it is: no exponent (`Decimal.__str__` writes one
/// when the adjusted exponent is below -6) and not a negative zero (the Python renderer's).
/// A number with integer digits (`push_decimal` writes no leading zero) is always both.
fn plain_decimal(s: &str, scale: usize) -> bool {
    if s.bytes().find(|&b| b != b'-').is_some_and(|b| b != b'0') {
        return true;
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let significant = digits.bytes().filter(|b| *b != b'.').skip_while(|b| *b == b'0').count().max(1);
    let zero = digits.bytes().all(|b| b == b'0' || b == b'.');
    significant as i64 - 1 - scale as i64 >= -6 && !(zero && s.starts_with('-'))
}

/// An exact `int` as i64 (a bool, another type or an overflow: None).
pub(crate) fn exact_int(obj: *mut ffi::PyObject) -> Option<i64> {
    // SAFETY: a live object; PyLong_CheckExact excludes bool and subclasses
    unsafe {
        if obj.is_null() || ffi::PyLong_CheckExact(obj) == 0 {
            return None;
        }
        let mut overflow = 0;
        let v = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if overflow != 0 || (v == -1 && !ffi::PyErr_Occurred().is_null()) {
            ffi::PyErr_Clear();
            return None;
        }
        Some(v)
    }
}

/// The slots of a frozen slots dataclass instance of `layout` as exact ints (None: one is not).
fn slot_ints<const N: usize>(obj: &Bound<'_, PyAny>, layout: &SlotLayout) -> Option<[i64; N]> {
    let mut out = [0i64; N];
    for (k, off) in layout.offsets.iter().take(N).enumerate() {
        // SAFETY: obj is an instance of layout.cls (checked by the caller)
        out[k] = exact_int(unsafe { slot(obj, *off) })?;
    }
    Some(out)
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl ImageLayout {
    /// `str(value)` of the temporal dataclasses (`temporal.py`), or None: not one of them, or
    /// a field the port does not take (the Python `__str__` then prints it).
    fn temporal_text(&self, t: &ValueTypes, v: &Bound<'_, PyAny>) -> Option<String> {
        let tp = v.get_type().as_ptr();
        let mut s = String::with_capacity(26);
        if tp == t.datetime.cls.as_ptr() {
            return Some(datetime_text(slot_ints::<8>(v, &t.datetime)?));
        } else if tp == t.timestamp.cls.as_ptr() {
            return timestamp_text(slot_ints::<3>(v, &t.timestamp)?);
        } else if tp == t.date.cls.as_ptr() {
            let [y, mo, d] = slot_ints::<3>(v, &t.date)?;
            push_date_time(&mut s, [y, mo, d], None);
        } else if tp == t.time.cls.as_ptr() {
            // SAFETY: v is an instance of t.time.cls; the first slot is `negative`
            let negative = unsafe { slot(v, t.time.offsets[0]) };
            // SAFETY: comparing object identity with the two bool singletons
            let neg = unsafe {
                if negative == ffi::Py_True() {
                    true
                } else if negative == ffi::Py_False() {
                    false
                } else {
                    return None;
                }
            };
            let mut parts = [0i64; 5];
            for (k, off) in t.time.offsets[1..].iter().enumerate() {
                // SAFETY: as in slot_ints
                parts[k] = exact_int(unsafe { slot(v, *off) })?;
            }
            return Some(time_text(neg, parts));
        } else {
            return None;
        }
        Some(s)
    }

    /// `render.decimal_text(value, scale)` when `str(value)` already is that text (what the
    /// decoders build), else None.
    fn decimal_text<'py>(&self, v: &Bound<'py, PyAny>, scale: usize) -> Option<Bound<'py, PyString>> {
        let text = v.str().ok()?;
        let s = text.to_str().ok()?;
        let digits = s.strip_prefix('-').unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None; // exponents, NaN, Infinity: the Python renderer
        }
        let frac = match s.find('.') {
            Some(dot) => s.len() - dot - 1,
            None => 0,
        };
        if frac != scale || (s.starts_with('-') && digits.bytes().all(|b| b == b'0' || b == b'.')) {
            return None; // another scale, or "-0": formatted by the Python renderer
        }
        Some(text)
    }

    /// One value: its JSON appended to `json`, its text to `text`.
    fn value(
        &self,
        py: Python<'_>,
        t: &ValueTypes,
        col: &RenderCol,
        v: &Bound<'_, PyAny>,
        json: &mut String,
        text: &mut NoText,
    ) -> Result<(), Fallback> {
        let p = v.as_ptr();
        // SAFETY: type checks and buffer access on a live object
        unsafe {
            if ffi::PyUnicode_CheckExact(p) != 0 {
                let Some(s) = str_utf8(p) else { return self.python_pair(py, col, v, json, text) };
                return emit_str(s, json, text);
            }
            if p == ffi::Py_None() {
                json.push_str("null");
                text.push_null();
                return Ok(());
            }
            if p == ffi::Py_True() || p == ffi::Py_False() {
                let s = if p == ffi::Py_True() { "1" } else { "0" };
                json.push_str(s);
                return Ok(text.push(s.as_bytes())?);
            }
            if ffi::PyLong_CheckExact(p) != 0 {
                let Some(n) = exact_int(p) else { return self.python_pair(py, col, v, json, text) };
                return emit_int(col, n, json, text);
            }
            if ffi::PyBytes_CheckExact(p) != 0 {
                let raw = v.cast::<PyBytes>().map_err(|_| Fallback)?.as_bytes();
                if !col.bytes_hex {
                    if let Ok(s) = std::str::from_utf8(raw) {
                        push_json_str(json, s);
                        return Ok(text.push(raw)?);
                    }
                }
                let mut s = String::with_capacity(2 + 2 * raw.len());
                s.push_str("0x");
                push_hex(&mut s, raw);
                json.push('"');
                json.push_str(&s);
                json.push('"');
                return Ok(text.push(s.as_bytes())?);
            }
        }
        if v.get_type().as_ptr() == t.decimal.as_ptr() {
            if let Some(s) = col.scale.and_then(|scale| self.decimal_text(v, scale)) {
                return emit_quoted(s.to_str().map_err(|_| Fallback)?, json, text);
            }
            return self.python_pair(py, col, v, json, text);
        }
        if let Some(s) = self.temporal_text(t, v) {
            return emit_quoted(&s, json, text);
        }
        self.python_pair(py, col, v, json, text)
    }

    /// One value rendered from its bytes at `pos` in `buf` (`reader`'s column `i`), as
    /// `value` renders what `ImageReader::value` decodes from them; a value of another kind, or
    /// one whose text that port does not take, is decoded and rendered by them. Returns where
    /// the value ends.
    #[allow(clippy::too_many_arguments)]
    fn value_from_bytes<'py>(
        &self,
        py: Python<'py>,
        t: &ValueTypes,
        col: &RenderCol,
        reader: &ImageReader,
        i: usize,
        data: &EventBytes<'_, 'py>,
        pos: usize,
        json: &mut String,
        text: &mut NoText,
    ) -> Result<usize, Fallback> {
        let buf = data.as_bytes();
        let at = |n: usize| pos.checked_add(n).and_then(|end| buf.get(pos..end)).ok_or(Fallback);
        match &reader.cols[i] {
            Col::Int { size, unsigned } => {
                let raw = le(at(*size)?);
                let n = if *unsigned {
                    i64::try_from(raw).ok()
                } else {
                    let shift = 64 - 8 * *size as u32;
                    Some(((raw << shift) as i64) >> shift)
                };
                if let Some(n) = n {
                    emit_int(col, n, json, text)?;
                    return Ok(pos + size);
                }
            }
            Col::Year => {
                let v = at(1)?[0] as i64;
                emit_int(col, if v != 0 { v + 1900 } else { 0 }, json, text)?;
                return Ok(pos + 1);
            }
            Col::Str { nlen, conv: Conv::Utf8 } => {
                let len = le(at(*nlen)?) as usize;
                let raw = buf.get(pos + nlen..pos + nlen + len).ok_or(Fallback)?;
                if let Ok(s) = std::str::from_utf8(raw) {
                    emit_str(s, json, text)?;
                    return Ok(pos + nlen + len);
                }
            }
            Col::Decimal { size, scale, groups, .. } if col.scale == Some(*scale) => {
                let raw = at(*size)?;
                let written = emit_quoted_with(json, text, |out| {
                    let start = out.len();
                    let plain = push_decimal(out, raw, *scale, groups) && plain_decimal(&out[start..], *scale);
                    if !plain {
                        out.truncate(start);
                    }
                    plain
                })?;
                if written {
                    return Ok(pos + size);
                }
            }
            Col::DateTime2 { fsp } => {
                let size = 5 + frac_bytes(*fsp);
                let fields = datetime2_fields(at(size)?, *fsp);
                emit_quoted_with(json, text, |out| {
                    push_datetime(out, fields);
                    true
                })?;
                return Ok(pos + size);
            }
            Col::Timestamp2 { fsp } => {
                let size = 4 + frac_bytes(*fsp);
                let fields = timestamp2_fields(at(size)?, *fsp);
                if emit_quoted_with(json, text, |out| push_timestamp(out, fields))? {
                    return Ok(pos + size);
                }
            }
            Col::Time2 { fsp } => {
                let size = 3 + frac_bytes(*fsp);
                let (neg, fields) = time2_fields(at(size)?, *fsp);
                emit_quoted_with(json, text, |out| {
                    push_time(out, neg, fields);
                    true
                })?;
                return Ok(pos + size);
            }
            Col::Date => {
                let [y, mo, d] = date_fields(at(3)?);
                emit_quoted_with(json, text, |out| {
                    push_date_time(out, [y, mo, d], None);
                    true
                })?;
                return Ok(pos + 3);
            }
            _ => {}
        }
        let (v, next) = reader.value(py, t, &reader.cols[i], data, pos)?;
        self.value(py, t, col, &v, json, text)?;
        Ok(next)
    }

    /// `render._pair_any(value, column)`: the JSON appended to `json`, the text to `text`.
    fn python_pair(
        &self,
        py: Python<'_>,
        col: &RenderCol,
        v: &Bound<'_, PyAny>,
        json: &mut String,
        text: &mut NoText,
    ) -> Result<(), Fallback> {
        let out = self.pair_any.bind(py).call1((v, col.column.bind(py)))?;
        let pair = out.cast_into::<PyTuple>().map_err(|_| Fallback)?;
        if pair.len() != 2 {
            return Err(Fallback);
        }
        let j = pair.get_item(0)?;
        json.push_str(j.cast::<PyString>().map_err(|_| Fallback)?.to_str()?);
        let s = pair.get_item(1)?;
        if s.is_none() {
            text.push_null();
            return Ok(());
        }
        Ok(text.push_str(s.cast::<PyString>().map_err(|_| Fallback)?)?)
    }

    /// One image's JSON text (its columns checked against the layout: Fallback when they are
    /// not this layout's).
    fn walk(&self, py: Python<'_>, t: &ValueTypes, row: &Bound<'_, PyAny>) -> Result<String, Fallback> {
        let row = row.cast::<PyDict>().map_err(|_| Fallback)?;
        let n = self.names.len();
        if row.len() != n {
            return Err(Fallback);
        }
        let mut json = String::with_capacity(16 * n + 2);
        json.push('{');
        for (i, (key, value)) in row.iter().enumerate() {
            let name = self.names[i].bind(py);
            if !(key.as_ptr() == name.as_ptr() || key.eq(name)?) {
                return Err(Fallback);
            }
            if i > 0 {
                json.push(',');
            }
            append_str(&mut json, &self.keys_json[i]);
            self.value(py, t, &self.cols[i], &value, &mut json, &mut NoText)?;
        }
        json.push('}');
        Ok(json)
    }

    /// One image read from its bytes at `pos` by `reader` (whose columns are this layout's)
    /// appended to a side's JSON column; returns where it ends.
    #[allow(clippy::too_many_arguments)]
    fn image_from_bytes<'py>(
        &self,
        py: Python<'py>,
        reader: &ImageReader,
        data: &EventBytes<'_, 'py>,
        mut pos: usize,
        json: &mut Utf8Builder,
        text: &mut String,
    ) -> Result<usize, Fallback> {
        let t = self.types.get();
        let n = self.names.len();
        let nb = (n + 7) >> 3;
        let nulls = data.as_bytes().get(pos..pos + nb).ok_or(Fallback)?;
        pos += nb;
        text.clear();
        text.push('{');
        for i in 0..n {
            if i > 0 {
                text.push(',');
            }
            append_str(text, &self.keys_json[i]);
            if nulls[i >> 3] >> (i & 7) & 1 != 0 {
                text.push_str("null");
            } else {
                pos = self.value_from_bytes(py, t, &self.cols[i], reader, i, data, pos, text, &mut NoText)?;
            }
        }
        text.push('}');
        json.push(text.as_bytes())?;
        Ok(pos)
    }

    /// Whether `reader`'s images have this layout's columns, in order.
    fn reads(&self, py: Python<'_>, reader: &ImageReader) -> bool {
        self.names.len() == reader.names.len()
            && self.names.iter().zip(&reader.names).all(|(a, b)| a.as_ptr() == b.as_ptr() || a.bind(py).as_any().eq(b.bind(py)).unwrap_or(false))
    }

    /// One image (or None) appended to a side's JSON column.
    fn image_into(
        layout: Option<&Self>,
        py: Python<'_>,
        t: &ValueTypes,
        row: &Bound<'_, PyAny>,
        json: &mut Utf8Builder,
    ) -> Result<(), Fallback> {
        if row.is_none() {
            json.push_null();
            return Ok(());
        }
        let text = layout.ok_or(Fallback)?.walk(py, t, row)?;
        json.push(text.as_bytes())?;
        Ok(())
    }
}

/// The images of a rows event's changes appended to `sink`. Returns the number of changes,
/// or None with the sink as it was: the caller renders the event in Python.
#[pyfunction]
#[pyo3(signature = (changes, before, after, sink))]
pub fn render_changes_into<'py>(
    py: Python<'py>,
    changes: &Bound<'py, PyAny>,
    before: Option<&Bound<'py, ImageLayout>>,
    after: Option<&Bound<'py, ImageLayout>>,
    sink: &Bound<'py, ImageColumns>,
) -> Option<usize> {
    let mut sink = sink.try_borrow_mut().ok()?;
    let mark = sink.__len__();
    let run = std::panic::AssertUnwindSafe(|| into_inner(py, changes, before.map(|b| b.get()), after.map(|a| a.get()), &mut sink));
    match std::panic::catch_unwind(run) {
        Ok(Ok(n)) => Some(n),
        _ => {
            // SAFETY: drop any pending Python error: the caller renders the event itself
            unsafe { ffi::PyErr_Clear() };
            sink.truncate_to(mark);
            None
        }
    }
}

fn into_inner(
    py: Python<'_>,
    changes: &Bound<'_, PyAny>,
    before: Option<&ImageLayout>,
    after: Option<&ImageLayout>,
    sink: &mut ImageColumns,
) -> Result<usize, Fallback> {
    if let Ok(rows) = changes.cast::<RowImages>() {
        return images_from_bytes(py, rows.get(), before, after, sink);
    }
    let types = match (before, after) {
        (Some(l), _) | (None, Some(l)) => l.types.get(),
        (None, None) => return Err(Fallback),
    };
    let ImageColumns { jsons: [bjson, ajson], .. } = sink;
    let mut n = 0;
    for change in changes.try_iter()? {
        let change = change?;
        let b = change.getattr(pyo3::intern!(py, "before"))?;
        let a = change.getattr(pyo3::intern!(py, "after"))?;
        ImageLayout::image_into(before, py, types, &b, bjson)?;
        ImageLayout::image_into(after, py, types, &a, ajson)?;
        n += 1;
    }
    Ok(n)
}

/// `into_inner` for images kept as their bytes: each rendered straight from them, in the
/// order they were written (the first reader's image, then for an UPDATE the second's).
fn images_from_bytes(
    py: Python<'_>,
    rows: &RowImages,
    before: Option<&ImageLayout>,
    after: Option<&ImageLayout>,
    sink: &mut ImageColumns,
) -> Result<usize, Fallback> {
    let (data, start, _, _, _) = rows.parts();
    images_from_data(py, &EventBytes::of(data.bind(py)), start, Changes::Exactly(rows.len()), rows.readers(), (before, after), sink)
}

/// How many changes `images_from_data` renders.
#[derive(Clone, Copy)]
pub(crate) enum Changes {
    /// this many (their number is known: `RowImages`)
    Exactly(usize),
    /// every change up to the end of the data, which must be fewer than this many (room left
    /// in the buffers): a rows event taken from its bytes is rendered in the one walk over
    /// them, not counted first
    ToTheEndBelow(usize),
}

/// The changes' images from `data[start..]`, read with `readers` (before, after) and rendered
/// with `layouts` (`images_from_bytes`; `sink::EventSink` for a rows event it takes straight
/// from the framed bytes); how many. On a fallback (bytes that would not decode, a change that
/// reads no bytes, more changes than `changes` allows), what was appended stays: the caller
/// cuts `sink` back.
pub(crate) fn images_from_data<'py>(
    py: Python<'py>,
    data: &EventBytes<'_, 'py>,
    start: usize,
    changes: Changes,
    (before_reader, after_reader): (Option<&ImageReader>, Option<&ImageReader>),
    (before, after): (Option<&ImageLayout>, Option<&ImageLayout>),
    sink: &mut ImageColumns,
) -> Result<usize, Fallback> {
    let (before, after) = (side(py, before, before_reader)?, side(py, after, after_reader)?);
    let ImageColumns { jsons: [bjson, ajson], scratch } = sink;
    let end = data.as_bytes().len();
    let (mut pos, mut count) = (start, 0usize);
    loop {
        match changes {
            Changes::Exactly(n) if count == n => break,
            Changes::ToTheEndBelow(_) if pos >= end => break,
            Changes::ToTheEndBelow(room) if count + 1 >= room => return Err(Fallback),
            _ => {}
        }
        let from = pos;
        match before {
            Some((layout, reader)) => pos = layout.image_from_bytes(py, reader, data, pos, bjson, scratch)?,
            None => {
                bjson.push_null();
            }
        }
        match after {
            Some((layout, reader)) => pos = layout.image_from_bytes(py, reader, data, pos, ajson, scratch)?,
            None => {
                ajson.push_null();
            }
        }
        if pos == from && matches!(changes, Changes::ToTheEndBelow(_)) {
            return Err(Fallback); // a change of no bytes: the walk would never end
        }
        count += 1;
    }
    Ok(count)
}

/// A side's layout and reader, when the layout is the reader's columns (None: no image).
fn side<'a, 'b>(
    py: Python<'_>,
    layout: Option<&'a ImageLayout>,
    reader: Option<&'b ImageReader>,
) -> Result<Option<(&'a ImageLayout, &'b ImageReader)>, Fallback> {
    match (layout, reader) {
        (Some(l), Some(r)) if l.reads(py, r) => Ok(Some((l, r))),
        (_, None) => Ok(None),
        _ => Err(Fallback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `push_json_str` writes, a character at a time: what the eight-byte scan must equal.
    fn json_str_bytewise(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn json_str_escapes_every_special_byte_at_every_place() {
        let specials = ['"', '\\', '\n', '\r', '\t', '\u{8}', '\u{c}', '\u{0}', '\u{1f}', '\u{7f}', ' ', '!', '#', '[', ']', 'é', '€'];
        for len in 0..20 {
            for at in 0..len.max(1) {
                for &c in &specials {
                    let s: String = (0..len).map(|i| if i == at { c } else { (b'a' + (i % 26) as u8) as char }).collect();
                    let mut got = String::new();
                    push_json_str(&mut got, &s);
                    assert_eq!(got, json_str_bytewise(&s), "{s:?}");
                }
            }
        }
        for s in ["", "\"\"\"\"\"\"\"\"\"", "\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}\u{9}x", "ab€cdéfgh\\ijklmnop\"q"] {
            let mut got = String::new();
            push_json_str(&mut got, s);
            assert_eq!(got, json_str_bytewise(s), "{s:?}");
        }
    }

    #[test]
    fn date_time_is_the_padded_format_in_and_out_of_the_fixed_widths() {
        let cases = [
            ([2024, 2, 29], Some([23, 59, 58])), ([0, 0, 0], Some([0, 0, 0])), ([9999, 12, 31], None), ([1, 1, 1], None),
            ([10_000, 1, 2], Some([3, 4, 5])), ([-5, 1, 2], Some([3, 4, 5])), ([2024, 123, 2], None),
            ([2024, 1, 2], Some([838, 59, 59])), ([2024, 1, 2], Some([-1, 4, 5])), ([2024, 1, 2], Some([1, 100, 5])),
        ];
        for ([y, mo, d], time) in cases {
            let mut got = String::from("x");
            push_date_time(&mut got, [y, mo, d], time);
            let mut want = format!("x{y:04}-{mo:02}-{d:02}");
            if let Some([h, mi, s]) = time {
                want.push_str(&format!(" {h:02}:{mi:02}:{s:02}"));
            }
            assert_eq!(got, want);
        }
    }
}
