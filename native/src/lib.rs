//! Compiled fast path of `binlog_parser`'s rows-event decoder (this file) and of its framing
//! loop (`framing.rs`, with the GTID / QUERY / XID bodies in `events.rs`).
//!
//! The pure-Python decoder in `binlog_parser/rows/` is the reference. This module decodes the
//! row images of WRITE / UPDATE / DELETE rows events (v1 and v2) into *the same Python objects*
//! that decoder builds: a dict per image keyed by the very column-name strings of the plan,
//! `int` / `float` / `bytes` / `str` values, `decimal.Decimal` built from the same text, and the
//! temporal and `RowChange` dataclass instances filled slot by slot exactly as
//! `binlog_parser._fast.slots_constructor` does. Column kinds it does not know (JSON, GEOMETRY,
//! charsets other than UTF-8 / binary, MariaDB 5.3 temporals, ...) call the column's
//! Python decoder.
//!
//! Errors are not reported here: any short read, impossible value or exception makes
//! `decode_rows` return `None`, and the caller decodes the event again with the pure-Python
//! decoder, which raises its exact error (type, file, offset and words).

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyList, PyString, PyTuple, PyType};

// column kinds, exported as `VALUE_KINDS` (binlog_parser/rows/_native.py takes its codes from
// there when the extension is loaded; tests/test_native_sink_layout.py holds them equal)
const K_PY: u32 = 0;
const K_INT: u32 = 1;
const K_FLOAT: u32 = 2;
const K_DOUBLE: u32 = 3;
const K_DECIMAL: u32 = 4;
const K_YEAR: u32 = 5;
const K_DATE: u32 = 6;
const K_TIME_OLD: u32 = 7;
const K_DATETIME_OLD: u32 = 8;
const K_TIMESTAMP_OLD: u32 = 9;
const K_TIMESTAMP2: u32 = 10;
const K_DATETIME2: u32 = 11;
const K_TIME2: u32 = 12;
const K_NULL: u32 = 13;
const K_BIT: u32 = 14;
const K_ENUM: u32 = 15;
const K_SET: u32 = 16;
const K_STR: u32 = 17;

// text conversions of K_STR
const C_RAW: u32 = 0;
const C_UTF8: u32 = 1;
const C_PAD: u32 = 2;

/// The interface version the Python bridge checks before using this module (2: the compiled
/// framing loop, `EventTypes` / `Frames`; 3: `EventTypes` also takes `HeaderOnlyEvent` and
/// `decode_header_only`, the header-only scan; 4: `ImageLayout` / `render_changes_into`, the row
/// images rendered, `render.rs`, and `FieldsLayout` / `fields_json`, events' fields as JSON,
/// `fields.rs`; 5: `ImageColumns`, the row image columns as Arrow buffers, `columns.rs`, which
/// `render_changes_into` now fills, and `RowColumns`, a table's columns appended by row; 6:
/// `RowImages`, rows kept as bytes, rendered from them, and `RowColumns.append_repeated`; 7:
/// `EventSink`, the rows of plain transactions appended inside the framing loop, `sink.rs`; 8:
/// the sink takes events from their bytes, `remember_table_map` and `remember_rows` take the
/// event they were worked out from; 9: `frames` takes the framer's `header_types`, the header
/// scan's filter; 10: and its `header_from`, the offset before which no header is wanted; 11:
/// `ImageColumns.take` hands each map's keys over as dictionary indices and names, `MapKeys`;
/// 12: `RowColumns` takes the kind `words`, a string column as a dictionary, `Words`; 13: the
/// module's `VALUE_KINDS` and `SINK_LAYOUT`, and `EventSink` refuses buffers of another layout;
/// 14: `ImageColumns` holds each image once, its typed JSON: `append(before, after)` and `take`
/// two columns, no maps).
const ABI: u32 = 14;

mod columns;
mod digits;
mod events;
mod fields;
mod framing;
mod render;
mod short_copy;
mod sink;

enum Conv {
    Raw,
    Utf8,
    Pad(usize),
}

enum Col {
    Py(Py<PyAny>),
    Int { size: usize, unsigned: bool },
    Float,
    Double,
    Decimal { size: usize, scale: usize, groups: Vec<(usize, usize, bool)>, slow: Py<PyAny> },
    Year,
    Date,
    TimeOld(Py<PyAny>),
    DateTimeOld(Py<PyAny>),
    TimestampOld,
    Timestamp2 { fsp: u32 },
    DateTime2 { fsp: u32 },
    Time2 { fsp: u32 },
    Null,
    Bit(usize),
    Enum { size: usize, names: Option<Vec<Py<PyAny>>> },
    Set { size: usize, names: Option<Vec<Py<PyAny>>> },
    Str { nlen: usize, conv: Conv },
}

/// How to build one frozen slots dataclass without its `__init__`: `object.__new__(cls)`, then
/// every field stored straight into its slot, in `dataclasses.fields` order -- the instance
/// `binlog_parser._fast.slots_constructor(cls)(*values)` builds, without a descriptor lookup
/// per field.
struct SlotLayout {
    cls: Py<PyType>,
    offsets: Vec<ffi::Py_ssize_t>,
}

const T_OBJECT_EX: i32 = 16; // structmember.h: a slot holding a PyObject*
const READONLY: i32 = 1;

impl SlotLayout {
    fn new(py: Python<'_>, cls: &Bound<'_, PyType>, n_fields: usize) -> PyResult<Self> {
        let fields = py.import("dataclasses")?.call_method1("fields", (cls,))?;
        let mut offsets = Vec::new();
        for f in fields.try_iter()? {
            let name: String = f?.getattr("name")?.extract()?;
            let descr = cls.getattr(name.as_str())?;
            if descr.get_type().name()?.to_string() != "member_descriptor" {
                return Err(PyValueError::new_err(format!("{cls}.{name} is not a slot")));
            }
            // SAFETY: a member_descriptor object is a PyMemberDescrObject whose d_member is a
            // PyMemberDef (pyo3-ffi types the field as PyGetSetDef)
            let (type_code, flags, offset) = unsafe {
                let md = descr.as_ptr() as *mut ffi::PyMemberDescrObject;
                let m = (*md).d_member as *mut ffi::PyMemberDef;
                ((*m).type_code, (*m).flags, (*m).offset)
            };
            let basic = unsafe { (*(cls.as_ptr() as *mut ffi::PyTypeObject)).tp_basicsize };
            if type_code != T_OBJECT_EX || flags & READONLY != 0 || offset <= 0 || offset >= basic {
                return Err(PyValueError::new_err(format!("{cls}.{name}: unexpected slot")));
            }
            offsets.push(offset);
        }
        if offsets.len() != n_fields {
            return Err(PyValueError::new_err(format!("{cls}: expected {n_fields} fields")));
        }
        Ok(SlotLayout { cls: cls.clone().unbind(), offsets })
    }

    #[inline]
    fn make<'py, const N: usize>(&self, py: Python<'py>, values: [Bound<'py, PyAny>; N]) -> PyResult<Bound<'py, PyAny>> {
        debug_assert_eq!(N, self.offsets.len());
        self.fill(py, values)
    }

    /// A new object of the class, its slots taken from `values` in order: the one place that
    /// writes slots (`make`, `make_with`, `SlotsConstructor`). The caller gives one value per
    /// slot (a missing one stays NULL: an unset attribute, never a dangling pointer).
    #[inline]
    pub(crate) fn fill<'py>(&self, py: Python<'py>, values: impl IntoIterator<Item = Bound<'py, PyAny>>)
                            -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: `cls` is the class whose member offsets `new` read; a fresh object from its
        // `tp_alloc` has every slot NULL, and each slot takes a new reference
        unsafe {
            let tp = self.cls.as_ptr() as *mut ffi::PyTypeObject;
            let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            let obj = Bound::from_owned_ptr_or_err(py, alloc(tp, 0))?;
            let base = obj.as_ptr() as *mut u8;
            for (off, v) in self.offsets.iter().zip(values) {
                *(base.offset(*off) as *mut *mut ffi::PyObject) = v.into_ptr();
            }
            Ok(obj)
        }
    }
}

/// `binlog_parser._fast.slots_constructor(cls)` compiled: `SlotsConstructor(cls)(*every_field)`
/// is the instance the Python constructor builds (same type, slots, equality, hash, repr).
#[pyclass(frozen, module = "binlog_parser._native_ext")]
struct SlotsConstructor {
    layout: SlotLayout,
}

#[pymethods]
impl SlotsConstructor {
    #[new]
    fn new(py: Python<'_>, cls: Bound<'_, PyType>) -> PyResult<Self> {
        let n = py.import("dataclasses")?.call_method1("fields", (&cls,))?.len()?;
        Ok(SlotsConstructor { layout: SlotLayout::new(py, &cls, n)? })
    }

    #[pyo3(signature = (*args))]
    fn __call__<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let offsets = &self.layout.offsets;
        if args.len() != offsets.len() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "{} takes {} positional arguments ({} given)",
                self.layout.cls.bind(py).name()?, offsets.len(), args.len())));
        }
        self.layout.fill(py, args.iter())
    }
}

/// The Python classes the decoded values are made of.
#[pyclass(frozen, module = "binlog_parser._native_ext")]
struct ValueTypes {
    decimal: Py<PyAny>,
    date: SlotLayout,
    datetime: SlotLayout,
    time: SlotLayout,
    timestamp: SlotLayout,
    row_change: SlotLayout,
    comma: Py<PyString>,
}

#[pymethods]
impl ValueTypes {
    #[new]
    fn new(
        py: Python<'_>,
        decimal: Py<PyAny>,
        date: Bound<'_, PyType>,
        datetime: Bound<'_, PyType>,
        time: Bound<'_, PyType>,
        timestamp: Bound<'_, PyType>,
        row_change: Bound<'_, PyType>,
    ) -> PyResult<Self> {
        Ok(ValueTypes {
            decimal,
            date: SlotLayout::new(py, &date, 3)?,
            datetime: SlotLayout::new(py, &datetime, 8)?,
            time: SlotLayout::new(py, &time, 6)?,
            timestamp: SlotLayout::new(py, &timestamp, 3)?,
            row_change: SlotLayout::new(py, &row_change, 2)?,
            comma: PyString::intern(py, ",").unbind(),
        })
    }
}

fn short() -> PyErr {
    PyValueError::new_err("value runs past the end of the event")
}

#[inline]
fn take(buf: &[u8], pos: usize, n: usize) -> PyResult<&[u8]> {
    match pos.checked_add(n) {
        Some(end) if end <= buf.len() => Ok(&buf[pos..end]),
        _ => Err(short()),
    }
}

#[inline]
pub(crate) fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64)
}

#[inline]
fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |v, &x| (v << 8) | x as u64)
}

#[inline]
fn int<'py>(py: Python<'py>, v: i64) -> Bound<'py, PyAny> {
    v.into_pyobject(py).unwrap().into_any()
}

#[inline]
fn uint<'py>(py: Python<'py>, v: u64) -> Bound<'py, PyAny> {
    v.into_pyobject(py).unwrap().into_any()
}

fn frac_bytes(fsp: u32) -> usize {
    ((fsp + 1) / 2) as usize
}

/// `temporal._read_frac`: big-endian fraction of `fsp` digits -> microseconds.
fn read_frac(b: &[u8], fsp: u32) -> i64 {
    match fsp {
        0 => 0,
        1 | 2 => b[0] as i64 * 10000,
        3 | 4 => be(&b[..2]) as i64 * 100,
        _ => be(&b[..3]) as i64,
    }
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10: [u64; 10] = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000];

/// One image's present columns, in order, with how to decode each.
#[pyclass(frozen, module = "binlog_parser._native_ext")]
struct ImageReader {
    types: Py<ValueTypes>,
    names: Vec<Py<PyString>>,
    cols: Vec<Col>,
    /// per column: the bytes and the value of the last immutable value decoded (see `memo_size`)
    memo: Vec<Mutex<Option<(Vec<u8>, Py<PyAny>)>>>,
}

impl Col {
    /// The size of a value of a fixed-width kind (None: strings and Python-decoded kinds).
    fn fixed_size(&self) -> Option<usize> {
        Some(match self {
            Col::Int { size, .. } | Col::Enum { size, .. } | Col::Set { size, .. } | Col::Bit(size) => *size,
            Col::Decimal { size, .. } => *size,
            Col::Float => 4,
            Col::Double => 8,
            Col::Year => 1,
            Col::Null => 0,
            Col::Date | Col::TimeOld(_) => 3,
            Col::TimestampOld => 4,
            Col::DateTimeOld(_) => 8,
            Col::Timestamp2 { fsp } => 4 + frac_bytes(*fsp),
            Col::DateTime2 { fsp } => 5 + frac_bytes(*fsp),
            Col::Time2 { fsp } => 3 + frac_bytes(*fsp),
            Col::Str { .. } | Col::Py(_) => return None,
        })
    }

    /// The value size of columns whose values are worth remembering: immutable objects that
    /// cost a constructor call (Decimal, the temporal dataclasses).
    fn memo_size(&self) -> Option<usize> {
        match self {
            Col::Decimal { .. } | Col::DateTime2 { .. } | Col::Timestamp2 { .. } | Col::Time2 { .. } | Col::Date
            | Col::TimeOld(_) | Col::TimestampOld | Col::DateTimeOld(_) => self.fixed_size(),
            _ => None,
        }
    }
}

fn parse_col(py: Python<'_>, kind: u32, a: usize, b: usize, c: usize, obj: &Bound<'_, PyAny>) -> PyResult<Col> {
    let names = |o: &Bound<'_, PyAny>| -> PyResult<Option<Vec<Py<PyAny>>>> {
        if o.is_none() {
            return Ok(None);
        }
        Ok(Some(o.try_iter()?.map(|x| x.map(|x| x.unbind())).collect::<PyResult<Vec<_>>>()?))
    };
    Ok(match kind {
        K_PY => Col::Py(obj.clone().unbind()),
        K_INT if matches!(a, 1 | 2 | 3 | 4 | 8) => Col::Int { size: a, unsigned: b != 0 },
        K_FLOAT => Col::Float,
        K_DOUBLE => Col::Double,
        K_DECIMAL if a >= b && a > 0 && a <= 65 && b <= 30 => {
            let (intg, scale) = (a - b, b);
            let mut groups = Vec::new();
            if intg % 9 != 0 {
                groups.push((DIG2BYTES[intg % 9], intg % 9, false));
            }
            groups.extend(std::iter::repeat((4, 9, false)).take(intg / 9));
            groups.extend(std::iter::repeat((4, 9, true)).take(scale / 9));
            if scale % 9 != 0 {
                groups.push((DIG2BYTES[scale % 9], scale % 9, true));
            }
            let size = groups.iter().map(|g| g.0).sum();
            if size == 0 {
                Col::Py(obj.clone().unbind())
            } else {
                Col::Decimal { size, scale, groups, slow: obj.clone().unbind() }
            }
        }
        K_YEAR => Col::Year,
        K_DATE => Col::Date,
        K_TIME_OLD => Col::TimeOld(obj.clone().unbind()),
        K_DATETIME_OLD => Col::DateTimeOld(obj.clone().unbind()),
        K_TIMESTAMP_OLD => Col::TimestampOld,
        K_TIMESTAMP2 if a <= 6 => Col::Timestamp2 { fsp: a as u32 },
        K_DATETIME2 if a <= 6 => Col::DateTime2 { fsp: a as u32 },
        K_TIME2 if a <= 6 => Col::Time2 { fsp: a as u32 },
        K_NULL => Col::Null,
        K_BIT => Col::Bit(a),
        K_ENUM if (1..=8).contains(&a) => Col::Enum { size: a, names: names(obj)? },
        K_SET if (1..=8).contains(&a) => Col::Set { size: a, names: names(obj)? },
        K_STR if (1..=4).contains(&a) => Col::Str {
            nlen: a,
            conv: match b as u32 {
                C_RAW => Conv::Raw,
                C_UTF8 => Conv::Utf8,
                C_PAD => Conv::Pad(c),
                _ => return Err(PyValueError::new_err(format!("unknown text conversion {b}"))),
            },
        },
        _ => {
            let _ = py;
            return Err(PyValueError::new_err(format!("bad column spec: kind {kind}, {a}, {b}")));
        }
    })
}

#[pymethods]
impl ImageReader {
    /// `specs`: one `(name, kind, a, b, c, obj)` per present column (see `_native.py`).
    #[new]
    fn new(py: Python<'_>, types: Py<ValueTypes>, specs: Vec<Bound<'_, PyTuple>>) -> PyResult<Self> {
        let mut names = Vec::with_capacity(specs.len());
        let mut cols = Vec::with_capacity(specs.len());
        for s in &specs {
            let name = s.get_item(0)?.cast_into::<PyString>()?.unbind();
            let kind: u32 = s.get_item(1)?.extract()?;
            let a: usize = s.get_item(2)?.extract()?;
            let b: usize = s.get_item(3)?.extract()?;
            let c: usize = s.get_item(4)?.extract()?;
            let obj = s.get_item(5)?;
            names.push(name);
            cols.push(parse_col(py, kind, a, b, c, &obj)?);
        }
        let memo = cols.iter().map(|_| Mutex::new(None)).collect();
        Ok(ImageReader { types, names, cols, memo })
    }

    fn __len__(&self) -> usize {
        self.cols.len()
    }
}

impl ImageReader {
    /// Where the image at `pos` ends, when every column is of a kind whose decoding cannot fail
    /// once its bytes are there (see `RowImages`); None: another kind, a short read, a DECIMAL
    /// the fast text does not take.
    fn skip(&self, buf: &[u8], mut pos: usize) -> Option<usize> {
        let n = self.cols.len();
        let nb = (n + 7) >> 3;
        let nulls = buf.get(pos..pos.checked_add(nb)?)?;
        pos += nb;
        for (i, col) in self.cols.iter().enumerate() {
            if nulls[i >> 3] >> (i & 7) & 1 != 0 {
                continue;
            }
            let size = match col {
                // decoded by Python, or with checks that can fail (the pre-5.6 temporals)
                Col::Py(_) | Col::TimeOld(_) | Col::DateTimeOld(_) => return None,
                Col::Str { nlen, .. } => nlen + le(buf.get(pos..pos.checked_add(*nlen)?)?) as usize,
                Col::Decimal { size, scale, groups, .. } => {
                    decimal_text(buf.get(pos..pos.checked_add(*size)?)?, *scale, groups)?;
                    *size
                }
                _ => col.fixed_size()?,
            };
            pos = pos.checked_add(size)?;
            if pos > buf.len() {
                return None;
            }
        }
        Some(pos)
    }

    /// One image at `pos`: (dict, position after it).
    fn read<'py>(&self, py: Python<'py>, t: &ValueTypes, body: &EventBytes<'_, 'py>, mut pos: usize) -> ValueAt<'py> {
        let buf = body.as_bytes();
        let n = self.cols.len();
        let nb = (n + 7) >> 3;
        let nulls = take(buf, pos, nb)?;
        pos += nb;
        // SAFETY: plain CPython dict API on a fresh dict; keys are str (hash cached)
        let row = unsafe { Bound::from_owned_ptr_or_err(py, ffi::_PyDict_NewPresized(n as ffi::Py_ssize_t))? };
        for (i, col) in self.cols.iter().enumerate() {
            let value = if nulls[i >> 3] >> (i & 7) & 1 != 0 {
                py.None().into_bound(py)
            } else if let Some(size) = col.memo_size() {
                // immutable values repeat (a statement's timestamps, prices): the last one
                // decoded from the same bytes is reused
                let raw = take(buf, pos, size)?;
                let memo = &self.memo[i];
                let hit = memo.try_lock().ok().and_then(|m| match &*m {
                    Some((key, v)) if key.as_slice() == raw => Some(v.clone_ref(py).into_bound(py)),
                    _ => None,
                });
                match hit {
                    Some(v) => {
                        pos += size;
                        v
                    }
                    None => {
                        let (v, next) = self.value(py, t, col, body, pos)?;
                        if next == pos + size {
                            if let Ok(mut m) = memo.try_lock() {
                                *m = Some((raw.to_vec(), v.clone().unbind()));
                            }
                        }
                        pos = next;
                        v
                    }
                }
            } else {
                let (v, next) = self.value(py, t, col, body, pos)?;
                pos = next;
                v
            };
            if unsafe { ffi::PyDict_SetItem(row.as_ptr(), self.names[i].as_ptr(), value.as_ptr()) } < 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok((row, pos))
    }

    #[inline]
    fn value<'py>(&self, py: Python<'py>, t: &ValueTypes, col: &Col, body: &EventBytes<'_, 'py>, pos: usize) -> ValueAt<'py> {
        let buf = body.as_bytes();
        Ok(match col {
            Col::Int { size, unsigned } => {
                let b = take(buf, pos, *size)?;
                let raw = le(b);
                let v = if *unsigned {
                    uint(py, raw)
                } else {
                    let shift = 64 - 8 * *size as u32;
                    int(py, ((raw << shift) as i64) >> shift)
                };
                (v, pos + size)
            }
            Col::Str { nlen, conv } => {
                let len = le(take(buf, pos, *nlen)?) as usize;
                let start = pos + nlen;
                let data = take(buf, start, len)?;
                (text(py, data, conv)?, start + len)
            }
            Col::Decimal { size, scale, groups, slow } => {
                let raw = take(buf, pos, *size)?;
                match decimal_text(raw, *scale, groups) {
                    Some(s) => {
                        let text = PyString::new(py, &s);
                        // SAFETY: one positional argument, a new reference or NULL + exception
                        let d = unsafe {
                            Bound::from_owned_ptr_or_err(py, ffi::PyObject_CallOneArg(t.decimal.as_ptr(), text.as_ptr()))?
                        };
                        (d, pos + size)
                    }
                    None => return call_py(py, slow, body, pos),
                }
            }
            Col::Double => {
                let b = take(buf, pos, 8)?;
                (f64::from_le_bytes(b.try_into().unwrap()).into_pyobject(py)?.into_any(), pos + 8)
            }
            Col::Float => {
                let b = take(buf, pos, 4)?;
                ((f32::from_le_bytes(b.try_into().unwrap()) as f64).into_pyobject(py)?.into_any(), pos + 4)
            }
            Col::Year => {
                let v = take(buf, pos, 1)?[0] as i64;
                (int(py, if v != 0 { v + 1900 } else { 0 }), pos + 1)
            }
            Col::Null => (py.None().into_bound(py), pos),
            Col::Bit(n) => (PyBytes::new(py, take(buf, pos, *n)?).into_any(), pos + n),
            Col::Enum { size, names } => {
                let idx = le(take(buf, pos, *size)?);
                let v = match names {
                    None => uint(py, idx),
                    Some(_) if idx == 0 => PyString::new(py, "").into_any(),
                    Some(ns) if (idx as usize) <= ns.len() => ns[idx as usize - 1].bind(py).clone(),
                    Some(_) => uint(py, idx),
                };
                (v, pos + size)
            }
            Col::Set { size, names } => {
                let mask = le(take(buf, pos, *size)?);
                let v = match names {
                    None => uint(py, mask),
                    Some(ns) => {
                        let chosen = PyList::empty(py);
                        for (i, n) in ns.iter().enumerate() {
                            if i < 64 && mask >> i & 1 != 0 {
                                chosen.append(n.bind(py))?;
                            }
                        }
                        t.comma.bind(py).call_method1("join", (chosen,))?
                    }
                };
                (v, pos + size)
            }
            Col::Py(dec) => return call_py(py, dec, body, pos),
            _ => return temporal(py, t, col, body, pos),
        })
    }
}

/// A decoded column value and the position just after its bytes.
type ValueAt<'py> = PyResult<(Bound<'py, PyAny>, usize)>;

/// TIME2 / DATETIME2 / TIMESTAMP2 (MySQL 5.6+ fractional encodings): `temporal.py`'s decoders.
fn temporal<'py>(py: Python<'py>, t: &ValueTypes, col: &Col, body: &EventBytes<'_, 'py>, pos: usize) -> ValueAt<'py> {
    let buf = body.as_bytes();
    Ok(match col {
        Col::DateTime2 { fsp } => {
            let size = 5 + frac_bytes(*fsp);
            let vals = datetime2_fields(take(buf, pos, size)?, *fsp).map(|v| int(py, v));
            (t.datetime.make(py, vals)?, pos + size)
        }
        Col::Timestamp2 { fsp } => {
            let size = 4 + frac_bytes(*fsp);
            let vals = timestamp2_fields(take(buf, pos, size)?, *fsp).map(|v| int(py, v));
            (t.timestamp.make(py, vals)?, pos + size)
        }
        Col::Time2 { fsp } => {
            let size = 3 + frac_bytes(*fsp);
            let (neg, fields) = time2_fields(take(buf, pos, size)?, *fsp);
            let [h, mi, sec, us, fsp] = fields.map(|v| int(py, v));
            let vals = [pyo3::types::PyBool::new(py, neg).to_owned().into_any(), h, mi, sec, us, fsp];
            (t.time.make(py, vals)?, pos + size)
        }
        _ => return temporal_old(py, t, col, body, pos),
    })
}

/// DATE and the pre-5.6 TIME / DATETIME / TIMESTAMP encodings.
fn temporal_old<'py>(py: Python<'py>, t: &ValueTypes, col: &Col, body: &EventBytes<'_, 'py>, pos: usize) -> ValueAt<'py> {
    let buf = body.as_bytes();
    Ok(match col {
        Col::Date => {
            let vals = date_fields(take(buf, pos, 3)?).map(|v| int(py, v));
            (t.date.make(py, vals)?, pos + 3)
        }
        Col::TimestampOld => {
            let v = le(take(buf, pos, 4)?);
            let vals = [uint(py, v), int(py, 0), int(py, 0)];
            (t.timestamp.make(py, vals)?, pos + 4)
        }
        Col::DateTimeOld(slow) => {
            let v = le(take(buf, pos, 8)?);
            let (d, tm) = (v / 1_000_000, v % 1_000_000);
            let f = [d / 10000, (d / 100) % 100, d % 100, tm / 10000, (tm / 100) % 100, tm % 100];
            if f[0] > 9999 || f[1] > 12 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
                return call_py(py, slow, body, pos); // raises the exact error
            }
            let vals = [
                uint(py, f[0]), uint(py, f[1]), uint(py, f[2]), uint(py, f[3]), uint(py, f[4]),
                uint(py, f[5]), int(py, 0), int(py, 0),
            ];
            (t.datetime.make(py, vals)?, pos + 8)
        }
        Col::TimeOld(slow) => {
            let raw = le(take(buf, pos, 3)?);
            let mut v = ((raw << 40) as i64) >> 40;
            let neg = v < 0;
            if neg {
                v = -v;
            }
            let (h, m, s) = (v / 10000, (v / 100) % 100, v % 100);
            if m > 59 || s > 59 || h > 838 {
                return call_py(py, slow, body, pos);
            }
            let vals = [
                pyo3::types::PyBool::new(py, neg).to_owned().into_any(),
                int(py, h), int(py, m), int(py, s), int(py, 0), int(py, 0),
            ];
            (t.time.make(py, vals)?, pos + 3)
        }
        _ => return Err(PyValueError::new_err("not a temporal column")),
    })
}

/// DATETIME2 (`temporal.py`): year, month, day, hour, minute, second, microsecond, fsp.
fn datetime2_fields(b: &[u8], fsp: u32) -> [i64; 8] {
    let v = be(&b[..5 + frac_bytes(fsp)]);
    let fshift = 8 * frac_bytes(fsp) as u32;
    let mut intpart = (v >> fshift) as i64 - 0x80_0000_0000;
    if intpart < 0 {
        intpart = -intpart;
    }
    let ymd = intpart >> 17;
    let ym = ymd >> 5;
    let hms = intpart & 0x1FFFF;
    let frac = read_frac(&b[5..], fsp);
    [ym / 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, frac, fsp as i64]
}

/// TIMESTAMP2: seconds since the epoch, microsecond, fsp.
fn timestamp2_fields(b: &[u8], fsp: u32) -> [i64; 3] {
    [be(&b[..4]) as i64, read_frac(&b[4..], fsp), fsp as i64]
}

/// DATE: year, month, day.
fn date_fields(b: &[u8]) -> [i64; 3] {
    let v = le(&b[..3]) as i64;
    [v >> 9, (v >> 5) & 15, v & 31]
}

/// TIME2: negative, and hour, minute, second, microsecond, fsp.
fn time2_fields(b: &[u8], fsp: u32) -> (bool, [i64; 5]) {
    let mut packed: i64 = match fsp {
        0 => (be(&b[..3]) as i64 - 0x800000) << 24,
        1 | 2 => {
            let mut ip = be(&b[..3]) as i64 - 0x800000;
            let mut frac = b[3] as i64;
            if ip < 0 && frac != 0 {
                ip += 1;
                frac -= 0x100;
            }
            (ip << 24) + frac * 10000
        }
        3 | 4 => {
            let mut ip = be(&b[..3]) as i64 - 0x800000;
            let mut frac = be(&b[3..5]) as i64;
            if ip < 0 && frac != 0 {
                ip += 1;
                frac -= 0x10000;
            }
            (ip << 24) + frac * 100
        }
        _ => be(&b[..6]) as i64 - 0x8000_0000_0000,
    };
    let neg = packed < 0;
    if neg {
        packed = -packed;
    }
    let hms = packed >> 24;
    (neg, [(hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63, packed & 0xFFFFFF, fsp as i64])
}

/// A rows event's bytes as the image readers read them, and the same bytes as a Python `bytes`
/// for a column decoded by a Python decoder, made the first time one is (most events have
/// none: copying every rows event's body into a `bytes` was about 1% of an ingest task).
pub(crate) struct EventBytes<'a, 'py> {
    bytes: &'a [u8],
    object: std::cell::OnceCell<Bound<'py, PyBytes>>,
}

impl<'a, 'py> EventBytes<'a, 'py> {
    /// Bytes borrowed from the framing buffer.
    pub(crate) fn borrowed(bytes: &'a [u8]) -> Self {
        EventBytes { bytes, object: std::cell::OnceCell::new() }
    }

    /// Bytes a Python `bytes` already holds.
    pub(crate) fn of(object: &'a Bound<'py, PyBytes>) -> Self {
        EventBytes { bytes: object.as_bytes(), object: std::cell::OnceCell::from(object.clone()) }
    }

    pub(crate) fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    fn object(&self, py: Python<'py>) -> &Bound<'py, PyBytes> {
        self.object.get_or_init(|| PyBytes::new(py, self.bytes))
    }
}

/// `dec(buf, pos) -> (value, new_pos)`: a column decoded by its Python decoder.
fn call_py<'py>(py: Python<'py>, dec: &Py<PyAny>, body: &EventBytes<'_, 'py>, pos: usize) -> ValueAt<'py> {
    let out = dec.bind(py).call1((body.object(py), pos))?;
    let (value, next): (Bound<'py, PyAny>, usize) = out.extract()?;
    if next > body.as_bytes().len() {
        return Err(short());
    }
    Ok((value, next))
}

fn text<'py>(py: Python<'py>, data: &[u8], conv: &Conv) -> PyResult<Bound<'py, PyAny>> {
    Ok(match conv {
        Conv::Raw => PyBytes::new(py, data).into_any(),
        Conv::Utf8 => unsafe {
            // CPython's own strict UTF-8 decoder (what bytes.decode("utf-8") runs); invalid
            // bytes stay bytes, as in charsets.make_text_decoder
            let s = ffi::PyUnicode_DecodeUTF8(data.as_ptr() as *const _, data.len() as ffi::Py_ssize_t, std::ptr::null());
            if s.is_null() {
                let _ = PyErr::take(py);
                PyBytes::new(py, data).into_any()
            } else {
                Bound::from_owned_ptr(py, s)
            }
        },
        Conv::Pad(width) => {
            if data.len() < *width {
                let mut v = data.to_vec();
                v.resize(*width, 0);
                PyBytes::new(py, &v).into_any()
            } else {
                PyBytes::new(py, data).into_any()
            }
        }
    })
}

/// `decimal.make_decimal_decoder`'s text for the value (sign, integer digits without leading
/// zeros or "0", "." and exactly `scale` digits), or None when a group holds more than its
/// digits (never written by a server; the Python decoder's exact slow path handles it).
fn decimal_text(raw: &[u8], scale: usize, groups: &[(usize, usize, bool)]) -> Option<String> {
    let mut out = String::with_capacity(48);
    push_decimal(&mut out, raw, scale, groups).then_some(out)
}

/// `decimal_text` appended to `out` (false: None there; `out` may then hold part of it).
/// Written in place: the integer digits without their leading zeros (the first group that is
/// not zero unpadded, the groups after it padded), then the fraction's.
pub(crate) fn push_decimal(out: &mut String, raw: &[u8], scale: usize, groups: &[(usize, usize, bool)]) -> bool {
    let negative = raw[0] & 0x80 == 0;
    let flip: u8 = if negative { 0xFF } else { 0 };
    if negative {
        out.push('-');
    }
    let mut integer_digits = false;
    let mut in_fraction = false;
    let mut off = 0;
    for &(nbytes, ndigits, is_frac) in groups {
        let mut v: u64 = 0;
        for k in 0..nbytes {
            let mut byte = raw[off + k] ^ flip;
            if off + k == 0 {
                byte ^= 0x80;
            }
            v = (v << 8) | byte as u64;
        }
        off += nbytes;
        if v >= POW10[ndigits] {
            return false;
        }
        if is_frac {
            if !in_fraction {
                if !integer_digits {
                    out.push('0');
                }
                if scale > 0 {
                    out.push('.');
                }
                in_fraction = true;
            }
            if scale > 0 {
                digits::push_padded(out, v as i64, ndigits);
            }
        } else if in_fraction {
            return false; // never written: the integer groups come first
        } else if integer_digits {
            digits::push_padded(out, v as i64, ndigits);
        } else if v > 0 {
            digits::push_int(out, v as i64);
            integer_digits = true;
        }
    }
    if !in_fraction {
        if !integer_digits {
            out.push('0');
        }
        if scale > 0 {
            out.push('.'); // a fraction of no group (never written)
        }
    }
    true
}

/// The rows of one event body `data[pos:]`: a tuple of `RowChange`, or None when anything is
/// wrong (the caller then runs the pure-Python decoder, which reports the exact error).
///
/// `kind`: 0 WRITE (only `first`), 1 UPDATE (`first` before, `second` after), 2 DELETE.
#[pyfunction]
#[pyo3(signature = (data, pos, kind, first, second=None))]
fn decode_rows<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    pos: usize,
    kind: u32,
    first: &Bound<'py, ImageReader>,
    second: Option<&Bound<'py, ImageReader>>,
) -> Option<Bound<'py, PyTuple>> {
    // a panic (a bug here, never expected) is one more reason to let the Python decoder answer
    let run = std::panic::AssertUnwindSafe(|| decode_rows_inner(py, data, pos, kind, first.get(), second.map(|s| s.get())));
    match std::panic::catch_unwind(run) {
        Ok(Ok(rows)) => Some(rows),
        _ => None,
    }
}

fn decode_rows_inner<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    mut pos: usize,
    kind: u32,
    first: &ImageReader,
    second: Option<&ImageReader>,
) -> PyResult<Bound<'py, PyTuple>> {
    let body = EventBytes::of(data);
    let buf = body.as_bytes();
    let types = first.types.get();
    let end = buf.len();
    let none = py.None().into_bound(py);
    let mut rows: Vec<Bound<'py, PyAny>> = Vec::new();
    while pos < end {
        let start = pos;
        let (img, next) = first.read(py, types, &body, pos)?;
        pos = next;
        let pair = match (kind, second) {
            (0, _) => [none.clone(), img],
            (2, _) => [img, none.clone()],
            (1, Some(after_reader)) => {
                let (after, next) = after_reader.read(py, types, &body, pos)?;
                pos = next;
                [img, after]
            }
            _ => return Err(PyValueError::new_err("bad rows kind")),
        };
        if pos == start {
            return Err(PyValueError::new_err("row image consumes no bytes"));
        }
        rows.push(types.row_change.make(py, pair)?);
    }
    PyTuple::new(py, rows)
}

/// The row images of a rows event kept as their bytes (a decoder context's `rows_as_bytes`):
/// a sequence of the `RowChange`s `decode_rows` would build, decoded when first read, that
/// `render_changes_into` renders straight from the bytes. The ingest renders every image and
/// reads no value: building the Python values it never reads was half of its decoding.
///
/// Only for images whose every column decodes without fail once its bytes are there, and
/// after a walk over all of them (`ImageReader::skip`): a rows event that would fail to decode
/// fails now, as without `rows_as_bytes`.
#[pyclass(frozen, sequence, module = "binlog_parser._native_ext")]
pub(crate) struct RowImages {
    data: Py<PyBytes>,
    start: usize,
    /// 0 WRITE, 1 UPDATE, 2 DELETE (`decode_rows`)
    kind: u32,
    first: Py<ImageReader>,
    second: Option<Py<ImageReader>>,
    count: usize,
    decoded: pyo3::sync::PyOnceLock<Py<PyTuple>>,
}

impl RowImages {
    /// The images' decoded `RowChange`s (once).
    fn changes<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyTuple>> {
        let rows = self.decoded.get_or_try_init(py, || {
            let second = self.second.as_ref().map(|s| s.get());
            decode_rows_inner(py, self.data.bind(py), self.start, self.kind, self.first.get(), second).map(Bound::unbind)
        })?;
        Ok(rows.bind(py))
    }

    /// How many changes (images, or before / after pairs).
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The readers of the before and after images (None: that side has none).
    pub(crate) fn readers(&self) -> (Option<&ImageReader>, Option<&ImageReader>) {
        sides(self.kind, self.first.get(), self.second.as_ref().map(|s| s.get()))
    }

    /// The bytes, where the images start, the kind and its readers (`render::images_from_bytes`;
    /// `sink::EventSink` reads another rows event of the same table and bitmaps with them).
    pub(crate) fn parts(&self) -> (&Py<PyBytes>, usize, u32, &Py<ImageReader>, Option<&Py<ImageReader>>) {
        (&self.data, self.start, self.kind, &self.first, self.second.as_ref())
    }
}

/// The before and after images' readers of a rows event of `kind` (0 WRITE, 1 UPDATE, 2
/// DELETE) from the readers of its first and second images.
pub(crate) fn sides<'a>(kind: u32, first: &'a ImageReader, second: Option<&'a ImageReader>)
                        -> (Option<&'a ImageReader>, Option<&'a ImageReader>) {
    match kind {
        0 => (None, Some(first)),
        1 => (Some(first), second),
        _ => (Some(first), None),
    }
}

/// How many changes the images from `start` on hold, each walked (`ImageReader::skip`) with
/// the readers of a rows event of `kind`; None: bytes that would not decode, or a reader that
/// is not there.
pub(crate) fn count_images(buf: &[u8], start: usize, kind: u32, first: &ImageReader, second: Option<&ImageReader>)
                           -> Option<usize> {
    let (mut pos, mut count) = (start, 0usize);
    while pos < buf.len() {
        let from = pos;
        pos = first.skip(buf, pos)?;
        if kind == 1 {
            pos = second?.skip(buf, pos)?;
        }
        if pos == from {
            return None;
        }
        count += 1;
    }
    Some(count)
}

#[pymethods]
impl RowImages {
    fn __len__(&self) -> usize {
        self.count
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.changes(py)?.as_any().get_item(index)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.changes(py)?.as_any().try_iter()?.into_any())
    }

    fn __eq__<'py>(&self, py: Python<'py>, other: Bound<'py, PyAny>) -> PyResult<bool> {
        let other = match other.cast::<RowImages>() {
            Ok(o) => o.get().changes(py)?.clone().into_any(),
            Err(_) => other,
        };
        self.changes(py)?.as_any().eq(other)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.changes(py)?.repr()?.to_string())
    }

    /// The column names of the before and after images, as the decoded images' keys (None:
    /// that side has no image).
    #[getter]
    fn image_names<'py>(&self, py: Python<'py>) -> PyResult<(Option<Bound<'py, PyTuple>>, Option<Bound<'py, PyTuple>>)> {
        let names = |r: Option<&ImageReader>| r.map(|r| PyTuple::new(py, r.names.iter().map(|n| n.bind(py)))).transpose();
        let (before, after) = self.readers();
        Ok((names(before)?, names(after)?))
    }

    /// The class of the decoded changes (`rows_event.RowChange`).
    #[getter]
    fn change_type<'py>(&self, py: Python<'py>) -> Bound<'py, PyType> {
        self.first.get().types.get().row_change.cls.bind(py).clone()
    }
}

/// `RowImages` of the images from `pos` on, or None: a column kind it does not take, or bytes
/// that would not decode (the images are then decoded as ever).
fn row_images(
    data: &Bound<'_, PyBytes>,
    start: usize,
    kind: u32,
    first: &Bound<'_, ImageReader>,
    second: Option<&Bound<'_, ImageReader>>,
) -> Option<RowImages> {
    let count = count_images(data.as_bytes(), start, kind, first.get(), second.map(|s| s.get()))?;
    Some(RowImages {
        data: data.clone().unbind(),
        start,
        kind,
        first: first.clone().unbind(),
        second: second.map(|s| s.clone().unbind()),
        count,
        decoded: pyo3::sync::PyOnceLock::new(),
    })
}

/// MySQL's length-encoded integer (`wire.packed_int`); None for the NULL marker, 0xff or a
/// short read (the Python decoder then reports the event).
pub(crate) fn packed_int(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    let first = *buf.get(pos)?;
    let n = match first {
        0..=0xFA => return Some((first as u64, pos + 1)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None,
    };
    let b = buf.get(pos + 1..pos + 1 + n)?;
    Some((le(b), pos + 1 + n))
}

/// `rows_event.decode_rows_event` for WRITE / UPDATE / DELETE v1 (23-25) and v2 (30-32): the
/// `RowsEvent` the Python decoder builds, or None for anything else or anything unusual (no
/// TABLE_MAP, a plan without its `native_reader` yet, a short or bad body...): the Python
/// decoder then decodes the event and reports what is wrong.
#[pyfunction]
fn decode_rows_event<'py>(
    py: Python<'py>,
    make_event: &Bound<'py, SlotsConstructor>,
    header: &Bound<'py, PyAny>,
    type_code: u32,
    body: &Bound<'py, PyAny>,
    post_header_lengths: &Bound<'py, PyBytes>,
    table_maps: &Bound<'py, pyo3::types::PyDict>,
) -> Option<Bound<'py, PyAny>> {
    let run = std::panic::AssertUnwindSafe(|| {
        rows_event_inner(py, make_event.get(), header, type_code, body, post_header_lengths, table_maps, false)
    });
    match std::panic::catch_unwind(run) {
        Ok(Ok(Some(ev))) => Some(ev),
        _ => None,
    }
}

/// What a rows event body holds before its images: table id, flags, extra data (v2), column
/// count, the column bitmaps (of the before or only image, and of an UPDATE's after image), and
/// where the images start.
pub(crate) struct RowsEventHead<'a> {
    pub table_id: u64,
    pub flags: u64,
    pub extra: &'a [u8],
    pub width: u64,
    pub present: &'a [u8],
    pub present_after: Option<&'a [u8]>,
    pub images: usize,
}

/// `RowsEventHead` of the body of a rows event of type `t` (23-25, 30-32; `phl`: its
/// post-header length), or None: another type, too short, or extra data of a bad length.
pub(crate) fn rows_event_head(buf: &[u8], phl: usize, t: u32) -> Option<RowsEventHead<'_>> {
    let (v2, update) = match t {
        23..=25 => (false, t == 24),
        30..=32 => (true, t == 31),
        _ => return None,
    };
    let id_len = if phl == 6 { 4 } else { 6 };
    let ids = buf.get(0..id_len + 2)?;
    let (table_id, flags) = (le(&ids[..id_len]), le(&ids[id_len..]));
    let mut pos = id_len + 2;
    let mut extra: &[u8] = b"";
    if if phl != 0 { phl == 10 } else { v2 } {
        let elen = le(buf.get(pos..pos + 2)?) as usize;
        if elen < 2 || pos + elen > buf.len() {
            return None;
        }
        extra = &buf[pos + 2..pos + elen];
        pos += elen;
    } else if phl > pos {
        pos = phl;
    }
    let (width, next) = packed_int(buf, pos)?;
    let nb = width.div_ceil(8) as usize;
    let present = buf.get(next..next.checked_add(nb)?)?;
    pos = next + nb;
    let present_after = if update {
        let after = buf.get(pos..pos.checked_add(nb)?)?;
        pos += nb;
        Some(after)
    } else {
        None
    };
    Some(RowsEventHead { table_id, flags, extra, width, present, present_after, images: pos })
}

/// `as_bytes`: the rows as `RowImages` when they can be (see there).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_event_inner<'py>(
    py: Python<'py>,
    make_event: &SlotsConstructor,
    header: &Bound<'py, PyAny>,
    t: u32,
    body: &Bound<'py, PyAny>,
    post_header_lengths: &Bound<'py, PyBytes>,
    table_maps: &Bound<'py, pyo3::types::PyDict>,
    as_bytes: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    use pyo3::types::PyDictMethods;
    let kind = match t {
        23 | 30 => 0u32,
        24 | 31 => 1,
        25 | 32 => 2,
        _ => return Ok(None),
    };
    let phls = post_header_lengths.as_bytes();
    let phl = phls.get(t as usize - 1).copied().unwrap_or(0) as usize;
    // bytes(body), as the Python decoder does: Python value decoders get these bytes
    let data = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyBytes_FromObject(body.as_ptr()))? }
        .cast_into::<PyBytes>()?;
    let buf = data.as_bytes();
    let Some(RowsEventHead { table_id, flags, extra, width, present: bm_before, present_after: bm_after, images: pos })
        = rows_event_head(buf, phl, t) else { return Ok(None) };
    let Some(tm) = table_maps.get_item(table_id)? else { return Ok(None) };
    let column_count: u64 = tm.getattr(pyo3::intern!(py, "column_count"))?.extract()?;
    if width != column_count {
        return Ok(None);
    }
    let plans = tm.getattr(pyo3::intern!(py, "plan_cache"))?.cast_into::<pyo3::types::PyDict>()?;
    let reader = |bitmap: &[u8]| -> PyResult<Option<Bound<'py, ImageReader>>> {
        let key = (PyBytes::new(py, bitmap), false);
        let Some(plan) = plans.get_item(key)? else { return Ok(None) };
        match plan.getattr_opt(pyo3::intern!(py, "native_reader"))? {
            Some(r) => Ok(r.cast_into::<ImageReader>().ok()),
            None => Ok(None),
        }
    };
    let Some(first) = reader(bm_before)? else { return Ok(None) };
    let second = match bm_after {
        Some(b) => match reader(b)? {
            Some(r) => Some(r),
            None => return Ok(None),
        },
        None => None,
    };
    let lazy = if as_bytes { row_images(&data, pos, kind, &first, second.as_ref()) } else { None };
    let rows = match lazy {
        Some(images) => Bound::new(py, images)?.into_any(),
        None => decode_rows_inner(py, &data, pos, kind, first.get(), second.as_ref().map(|s| s.get()))?.into_any(),
    };
    let none = py.None().into_bound(py);
    let args = PyTuple::new(py, [
        header.clone(),
        uint(py, table_id),
        uint(py, flags),
        PyBytes::new(py, extra).into_any(),
        uint(py, width),
        PyBytes::new(py, bm_before).into_any(),
        match bm_after {
            Some(b) => PyBytes::new(py, b).into_any(),
            None => none,
        },
        rows,
        tm,
    ])?;
    Ok(Some(make_event.__call__(py, &args)?))
}

#[pymodule]
fn _native_ext(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI", ABI)?;
    let kinds = [("K_PY", K_PY), ("K_INT", K_INT), ("K_FLOAT", K_FLOAT), ("K_DOUBLE", K_DOUBLE), ("K_DECIMAL", K_DECIMAL),
                 ("K_YEAR", K_YEAR), ("K_DATE", K_DATE), ("K_TIME_OLD", K_TIME_OLD), ("K_DATETIME_OLD", K_DATETIME_OLD),
                 ("K_TIMESTAMP_OLD", K_TIMESTAMP_OLD), ("K_TIMESTAMP2", K_TIMESTAMP2), ("K_DATETIME2", K_DATETIME2),
                 ("K_TIME2", K_TIME2), ("K_NULL", K_NULL), ("K_BIT", K_BIT), ("K_ENUM", K_ENUM), ("K_SET", K_SET),
                 ("K_STR", K_STR), ("C_RAW", C_RAW), ("C_UTF8", C_UTF8), ("C_PAD", C_PAD)];
    m.add("VALUE_KINDS", kinds.into_py_dict(m.py())?)?;
    m.add("SINK_LAYOUT", sink::SINK_LAYOUT.to_vec())?;
    m.add_class::<ValueTypes>()?;
    m.add_class::<ImageReader>()?;
    m.add_class::<RowImages>()?;
    m.add_class::<SlotsConstructor>()?;
    m.add_class::<framing::EventTypes>()?;
    m.add_class::<framing::Frames>()?;
    m.add_function(wrap_pyfunction!(decode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(decode_rows_event, m)?)?;
    m.add_class::<render::ImageLayout>()?;
    m.add_class::<columns::ImageColumns>()?;
    m.add_class::<columns::RowColumns>()?;
    m.add_class::<columns::ArrowBuffer>()?;
    m.add_class::<sink::EventSink>()?;
    m.add_function(wrap_pyfunction!(render::render_changes_into, m)?)?;
    m.add_class::<fields::FieldsLayout>()?;
    m.add_function(wrap_pyfunction!(fields::fields_json, m)?)?;
    Ok(())
}
