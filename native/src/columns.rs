//! Arrow column buffers filled in Rust: `ImageColumns`, the two row image columns of
//! `silver.row_changes` (typed JSON strings), and `RowColumns`, the
//! columns of a table appended row by row (ints, timestamps, bools, strings, bytes).
//!
//! `render_changes_into` writes each rendered value's bytes straight into `ImageColumns`, so no
//! Python `str` is made per value; `RowColumns.append` takes a whole row in one call. Neither
//! leaves a Python list for `pa.array` to walk per batch: `take` hands the buffers over in
//! Arrow's own layout (validity bitmap, values or i32 offsets and data; the values, offsets
//! and data as the very `Vec`s filled, in an `ArrowBuffer`), and
//! `binlake.ingest.columns` wraps them as Arrow arrays without another pass over the values.

use std::borrow::Cow;
use std::collections::HashMap;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};

use crate::render::str_utf8;
use crate::short_copy::append;

/// Why a value cannot go into a buffer: an Arrow string array holds at most 2 GiB - 1 bytes.
#[derive(Debug)]
pub(crate) struct Overflow;

fn overflow_err() -> PyErr {
    PyOverflowError::new_err("the text of one batch passes 2 GiB (an Arrow string column's limit)")
}

/// What an `ArrowBuffer` owns: a builder's `Vec`, as it was filled.
enum Owned {
    Bytes(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// A column buffer handed to Arrow without a copy: the `Vec` a builder filled, read through the
/// buffer protocol (read-only; `pa.py_buffer` wraps it, and the Arrow buffer keeps this object
/// alive). Copying each batch's values into a new `bytes` was about 1.5% of an ingest task.
/// Integers are Arrow's little-endian layout as they are in memory on a little-endian machine;
/// elsewhere they are copied into that layout first (`little_endian_i32`, `little_endian_i64`).
#[pyclass(module = "binlog_parser._native_ext", frozen)]
pub struct ArrowBuffer {
    owned: Owned,
}

impl ArrowBuffer {
    fn bytes(&self) -> &[u8] {
        match &self.owned {
            Owned::Bytes(v) => v,
            // SAFETY: the integers' own memory, `len * size` bytes, as long as `self`
            Owned::I32(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 4) },
            Owned::I64(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 8) },
        }
    }
}

#[pymethods]
impl ArrowBuffer {
    /// # Safety
    /// CPython's buffer protocol: `view` is the caller's `Py_buffer`; the memory is never
    /// written nor moved while this object lives (it is frozen and owns it).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: std::os::raw::c_int) -> PyResult<()> {
        let bytes = slf.get().bytes();
        let len = ffi::Py_ssize_t::try_from(bytes.len())
            .map_err(|_| PyOverflowError::new_err("a column buffer larger than the address space"))?;
        // read-only: a request for a writable buffer fails with BufferError
        if ffi::PyBuffer_FillInfo(view, slf.as_ptr(), bytes.as_ptr() as *mut std::os::raw::c_void, len, 1, flags) == -1
        {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.bytes().len()
    }
}

/// `vec`'s contents handed over in the layout `owned` gives them; `vec` is left empty with the
/// same capacity (the next batch is about as large: no growing again from nothing).
fn handed_over<'py, T>(py: Python<'py>, vec: &mut Vec<T>, owned: fn(Vec<T>) -> Owned) -> PyResult<Bound<'py, ArrowBuffer>> {
    let cap = vec.capacity();
    Bound::new(py, ArrowBuffer { owned: owned(std::mem::replace(vec, Vec::with_capacity(cap))) })
}

/// int32s in Arrow's layout: as they are on a little-endian machine, else copied into it.
fn little_endian_i32(v: Vec<i32>) -> Owned {
    if cfg!(target_endian = "little") {
        Owned::I32(v)
    } else {
        Owned::Bytes(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

/// int64s in Arrow's layout, as `little_endian_i32`.
fn little_endian_i64(v: Vec<i64>) -> Owned {
    if cfg!(target_endian = "little") {
        Owned::I64(v)
    } else {
        Owned::Bytes(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

/// An Arrow bitmap being built, least significant bit first (bool values, validity).
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if bit {
            self.bytes[self.len / 8] |= 1 << (self.len % 8);
        }
        self.len += 1;
    }

    /// `bit`, `k` times: a mask for the first and last byte, whole bytes between (the bits past
    /// `len` are always clear: `push` and `truncate` keep them so).
    fn push_n(&mut self, bit: bool, k: usize) {
        let (start, end) = (self.len, self.len + k);
        self.bytes.resize(end.div_ceil(8), 0);
        if bit && k > 0 {
            let (first, last) = (start / 8, (end - 1) / 8);
            let head = 0xffu8 << (start % 8);
            let tail = 0xffu8 >> (7 - (end - 1) % 8);
            if first == last {
                self.bytes[first] |= head & tail;
            } else {
                self.bytes[first] |= head;
                self.bytes[first + 1..last].fill(0xff);
                self.bytes[last] |= tail;
            }
        }
        self.len = end;
    }

    fn get(&self, i: usize) -> bool {
        self.bytes[i / 8] & (1 << (i % 8)) != 0
    }

    /// Emptied, its capacity kept.
    fn clear(&mut self) {
        self.bytes.clear();
        self.len = 0;
    }

    /// The last bit pushed (None: none yet).
    fn last(&self) -> Option<bool> {
        Some(self.get(self.len.checked_sub(1)?))
    }

    /// Back to the first `len` bits; the ones dropped that were set are counted.
    fn truncate(&mut self, len: usize) -> usize {
        let mut set = 0;
        while self.len > len {
            self.len -= 1;
            let (byte, bit) = (self.len / 8, 1u8 << (self.len % 8));
            if self.bytes[byte] & bit != 0 {
                set += 1;
            }
            self.bytes[byte] &= !bit;
        }
        self.bytes.truncate(len.div_ceil(8));
        set
    }
}

/// An Arrow validity bitmap being built (bit set: a value), with its NULL count.
#[derive(Default)]
struct Validity {
    bits: Bits,
    nulls: usize,
}

impl Validity {
    fn push(&mut self, valid: bool) {
        self.bits.push(valid);
        self.nulls += usize::from(!valid);
    }

    fn push_n(&mut self, valid: bool, k: usize) {
        self.bits.push_n(valid, k);
        self.nulls += if valid { 0 } else { k };
    }

    fn len(&self) -> usize {
        self.bits.len
    }

    /// The last validity pushed (None: none yet).
    fn last(&self) -> Option<bool> {
        self.bits.last()
    }

    fn truncate(&mut self, len: usize) {
        let dropped = self.bits.len.saturating_sub(len);
        let valid = self.bits.truncate(len);
        self.nulls -= dropped - valid;
    }

    /// The bitmap as `bytes`, or None when no value is NULL (Arrow's "all valid"); emptied,
    /// its capacity kept for the next batch.
    fn take<'py>(&mut self, py: Python<'py>) -> (usize, Option<Bound<'py, PyBytes>>) {
        let nulls = self.nulls;
        let bits = (nulls > 0).then(|| PyBytes::new(py, &self.bits.bytes));
        self.bits.clear();
        self.nulls = 0;
        (nulls, bits)
    }
}

/// An Arrow `string` column being built.
pub(crate) struct Utf8Builder {
    data: Vec<u8>,
    offsets: Vec<i32>,
    validity: Validity,
}

impl Default for Utf8Builder {
    fn default() -> Self {
        Utf8Builder { data: Vec::new(), offsets: vec![0], validity: Validity::default() }
    }
}

impl Utf8Builder {
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The bytes of value `i` (empty for a NULL or past the end).
    fn value(&self, i: usize) -> &[u8] {
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&start), Some(&end)) => &self.data[start as usize..end as usize],
            _ => &[],
        }
    }

    /// One value: `bytes` (valid UTF-8).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let end = i32::try_from(self.data.len() + bytes.len()).map_err(|_| Overflow)?;
        append(&mut self.data, bytes);
        self.offsets.push(end);
        self.validity.push(true);
        Ok(())
    }

    pub(crate) fn push_null(&mut self) {
        self.offsets.push(*self.offsets.last().unwrap_or(&0));
        self.validity.push(false);
    }

    /// The last value (or NULL), `k` more times.
    fn repeat_last(&mut self, k: usize) -> Result<(), Overflow> {
        let (Some(valid), rows) = (self.validity.last(), self.len()) else { return Ok(()) };
        let start = self.offsets[rows - 1] as usize;
        let end = self.offsets[rows] as usize;
        let width = if valid { end - start } else { 0 };
        // the last offset checked once: the ones before it are smaller
        i32::try_from(self.data.len() + k * width).map_err(|_| Overflow)?;
        self.data.reserve(k * width);
        // the copies made so far copied again, doubling them: a few copies, not one per row
        let mut copies = 0;
        while width > 0 && copies < k {
            let more = (copies + 1).min(k - copies);
            self.data.extend_from_within(start..start + more * width);
            copies += more;
        }
        self.offsets.extend((1..=k).map(|j| (end + j * width) as i32));
        self.validity.push_n(valid, k);
        Ok(())
    }

    /// One value: a `str`, or None (NULL).
    fn push_py(&mut self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        if v.is_none() {
            self.push_null();
            return Ok(());
        }
        self.push_str(v.cast::<PyString>()?)
    }

    /// A `str` (`arrow_utf8`).
    pub(crate) fn push_str(&mut self, s: &Bound<'_, PyString>) -> PyResult<()> {
        self.push(&arrow_utf8(s)?).map_err(|_| overflow_err())
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows + 1);
        self.data.truncate(self.offsets[rows] as usize);
        self.validity.truncate(rows);
    }

    /// `(rows, nulls, validity or None, offsets, data)`; the builder is emptied, its capacity
    /// kept (the next batch is about as large: no growing again from nothing).
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rows = self.len();
        let (nulls, validity) = self.validity.take(py);
        let offsets = handed_over(py, &mut self.offsets, little_endian_i32)?;
        let data = handed_over(py, &mut self.data, Owned::Bytes)?;
        self.offsets.push(0);
        (rows, nulls, validity, offsets, data).into_pyobject(py)
    }
}

/// A `str`'s UTF-8 as an Arrow string holds it: lone surrogates (names decoded with
/// `surrogateescape`) written as `s.encode("utf-8", "backslashreplace")` writes them, `\udcff`:
/// no Arrow string holds a surrogate, and in a JSON text that is the escape of the same character.
pub(crate) fn arrow_utf8<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, [u8]>> {
    // SAFETY: a live str; its UTF-8 is cached on it, so it lives as long as `s`
    if let Some(text) = unsafe { str_utf8(s.as_ptr()) } {
        return Ok(Cow::Borrowed(text.as_bytes()));
    }
    let escaped = s.call_method1("encode", ("utf-8", "backslashreplace"))?;
    Ok(Cow::Owned(escaped.cast::<PyBytes>()?.as_bytes().to_vec()))
}

/// The words of an Arrow dictionary being built: each distinct word once, in the order first
/// seen, and the index of each (keyed at random: the words come from the binlog).
#[derive(Default)]
pub(crate) struct Dictionary {
    words: Utf8Builder,
    index: HashMap<Vec<u8>, i32, ahash::RandomState>,
}

impl Dictionary {
    /// Whether word `i` is `word`.
    fn is(&self, i: i32, word: &[u8]) -> bool {
        (i as usize) < self.words.len() && self.words.value(i as usize) == word
    }

    /// The index of `word`, added when it is new.
    fn index_of(&mut self, word: &[u8]) -> Result<i32, Overflow> {
        if let Some(&i) = self.index.get(word) {
            return Ok(i);
        }
        let i = i32::try_from(self.words.len()).map_err(|_| Overflow)?;
        self.words.push(word)?;
        self.index.insert(word.to_vec(), i);
        Ok(i)
    }

    /// The words as `Utf8Builder::take` gives a column; emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.index.clear();
        self.words.take(py)
    }

}

/// Where the renderer would write a value's server text: nowhere. `silver.row_changes` stores
/// each image once, as its typed JSON (docs/row_values.md derives the text from it), so the
/// renderer's text calls compile to nothing.
pub(crate) struct NoText;

impl NoText {
    #[inline(always)]
    pub(crate) fn push(&mut self, _bytes: &[u8]) -> Result<(), Overflow> {
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn push_null(&mut self) {}

    #[inline(always)]
    pub(crate) fn push_str(&mut self, _s: &Bound<'_, PyString>) -> PyResult<()> {
        Ok(())
    }
}

/// The row image columns of `silver.row_changes` being built: per side (before, after) the
/// typed JSON text of each change's image (`before`, `after`).
#[pyclass(module = "binlog_parser._native_ext")]
#[derive(Default)]
pub struct ImageColumns {
    pub(crate) jsons: [Utf8Builder; 2],
    /// where the renderer writes an image's JSON before appending it (kept: no `String` per
    /// image)
    pub(crate) scratch: String,
}

impl ImageColumns {
    /// Back to the first `changes` changes.
    pub(crate) fn truncate_to(&mut self, changes: usize) {
        for j in &mut self.jsons {
            if changes < j.len() {
                j.truncate(changes);
            }
        }
    }
}

#[pymethods]
impl ImageColumns {
    #[new]
    fn new() -> Self {
        ImageColumns::default()
    }

    /// Changes appended so far.
    pub(crate) fn __len__(&self) -> usize {
        self.jsons[0].len()
    }

    /// One change's images, rendered by Python: each side's JSON text (or None for no image).
    /// On an error nothing is appended.
    fn append(&mut self, before: &Bound<'_, PyAny>, after: &Bound<'_, PyAny>) -> PyResult<()> {
        let mark = self.jsons[0].len();
        let result = (|| {
            self.jsons[0].push_py(before)?;
            self.jsons[1].push_py(after)
        })();
        if result.is_err() {
            self.truncate_to(mark);
        }
        result
    }

    /// Back to the first `changes` changes.
    fn truncate(&mut self, changes: usize) {
        self.truncate_to(changes);
    }

    /// `(before JSON, after JSON)` as buffers (see `Utf8Builder::take`); the columns are emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let [bj, aj] = &mut self.jsons;
        (bj.take(py)?, aj.take(py)?).into_pyobject(py)
    }
}

/// A value of a row the extension appends itself (`RowColumns::append_cells`).
pub(crate) enum Cell<'a, 'py> {
    Null,
    UInt(u64),
    /// text for a string column
    Str(&'a str),
    /// any value `RowColumns.append` takes
    Py(&'a Bound<'py, PyAny>),
}

/// A string column of few distinct values (names, kinds, GTIDs shared by a transaction's
/// rows) as an Arrow dictionary: each distinct word once per batch and an int32 index per row.
/// Parquet then writes the indices it is given (it would otherwise hash every value to find the
/// same words), and the rows of a rows event, which share these values, repeat one index.
#[derive(Default)]
pub(crate) struct Words {
    words: Dictionary,
    /// the `str` objects last pushed and their indices: the extension pushes the same objects
    /// again and again (an event type's name, a table's names, a transaction's GTID), found
    /// here by identity, without hashing their text (held, so an identity is never reused)
    recent: Vec<(Py<PyAny>, i32)>,
    /// the `recent` entry replaced next once it is full
    next_recent: usize,
    indices: Vec<i32>,
    validity: Validity,
}

/// `str` objects a `Words` column keeps for lookup by identity
const RECENT_WORDS: usize = 8;

impl Words {
    fn len(&self) -> usize {
        self.indices.len()
    }

    /// The index of `word`, added to the words when it is new.
    fn index_of(&mut self, word: &[u8]) -> Result<i32, Overflow> {
        // the same word as the row before (a file's checksum kind) is not hashed again
        match self.indices.last() {
            Some(&i) if self.words.is(i, word) => Ok(i),
            _ => self.words.index_of(word),
        }
    }

    fn push(&mut self, word: &[u8]) -> Result<(), Overflow> {
        let i = self.index_of(word)?;
        self.push_index(i);
        Ok(())
    }

    fn push_index(&mut self, i: i32) {
        self.indices.push(i);
        self.validity.push(true);
    }

    /// A `str` (`arrow_utf8`), found by identity when it was pushed lately.
    fn push_str(&mut self, s: &Bound<'_, PyString>) -> PyResult<()> {
        let found = self.recent.iter().find(|(o, _)| o.as_ptr() == s.as_ptr()).map(|(_, i)| *i);
        let i = match found {
            Some(i) => i,
            None => {
                let i = self.index_of(&arrow_utf8(s)?).map_err(|_| overflow_err())?;
                let entry = (s.clone().into_any().unbind(), i);
                if self.recent.len() < RECENT_WORDS {
                    self.recent.push(entry);
                } else {
                    self.recent[self.next_recent] = entry;
                    self.next_recent = (self.next_recent + 1) % RECENT_WORDS;
                }
                i
            }
        };
        self.push_index(i);
        Ok(())
    }

    fn push_null(&mut self) {
        self.indices.push(0);
        self.validity.push(false);
    }

    fn truncate(&mut self, rows: usize) {
        self.indices.truncate(rows);
        self.validity.truncate(rows);
    }

    fn repeat_last(&mut self, k: usize) {
        let (Some(&i), Some(valid)) = (self.indices.last(), self.validity.last()) else { return };
        self.indices.resize(self.indices.len() + k, i);
        self.validity.push_n(valid, k);
    }

    /// `(rows, nulls, validity or None, indices, words)`, the words as `Utf8Builder::take`
    /// gives a column; emptied, the next batch starts a dictionary of its own.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rows = self.len();
        let (nulls, validity) = self.validity.take(py);
        let indices = handed_over(py, &mut self.indices, little_endian_i32)?;
        self.recent.clear();
        self.next_recent = 0;
        (rows, nulls, validity, indices, self.words.take(py)?).into_pyobject(py)
    }
}

/// How `RowColumns` holds one column: the Arrow layout it builds.
enum RowColumn {
    /// int64 (and timestamp[us], which is its int64 microseconds) or int32 (`narrow`);
    /// `sequence`: a row appended n times counts up from its value (`append_repeated`)
    Int { values: Vec<i64>, validity: Validity, narrow: bool, sequence: bool },
    Bool { values: Bits, validity: Validity },
    /// string (`utf8`: str, or bytes that are UTF-8) or binary (bytes-like)
    Bytes { data: Utf8Builder, utf8: bool },
    /// string as a dictionary (`Words`)
    Words(Words),
    /// anything else (lists, ...): the Python objects, for `pa.array`
    Object(Vec<Py<PyAny>>),
}

impl RowColumn {
    fn len(&self) -> usize {
        match self {
            RowColumn::Int { values, .. } => values.len(),
            RowColumn::Bool { validity, .. } => validity.len(),
            RowColumn::Bytes { data, .. } => data.len(),
            RowColumn::Words(w) => w.len(),
            RowColumn::Object(v) => v.len(),
        }
    }

    /// One value; `Ok(Some(why))`: an integer out of the column's range, stored as NULL.
    fn push(&mut self, v: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let none = v.is_none();
        match self {
            RowColumn::Int { values, validity, narrow, .. } => {
                if !none && !v.is_instance_of::<PyInt>() {
                    return Err(PyTypeError::new_err(format!("{} is not an integer", v.repr()?)));
                }
                let n: Option<i64> = if none { Some(0) } else { v.extract().ok() };
                let Some(n) = n.filter(|n| !*narrow || i32::try_from(*n).is_ok()) else {
                    let what = if *narrow { "an INT (int32)" } else { "a BIGINT (int64)" };
                    values.push(0);
                    validity.push(false);
                    return Ok(Some(format!("{} does not fit {what} column", v.repr()?)));
                };
                values.push(n);
                validity.push(!none);
            }
            RowColumn::Bool { values, validity } => {
                // SAFETY: identity checks with the two bool singletons
                let b = unsafe { v.as_ptr() == ffi::Py_True() };
                if !none && !b && unsafe { v.as_ptr() != ffi::Py_False() } {
                    return Err(PyTypeError::new_err("a bool column takes True, False or None"));
                }
                values.push(b);
                validity.push(!none);
            }
            RowColumn::Bytes { data, utf8 } => {
                if none {
                    data.push_null();
                } else if let Ok(s) = v.cast::<PyString>() {
                    if !*utf8 {
                        return Err(PyTypeError::new_err("a binary column takes bytes, not str"));
                    }
                    data.push_str(s)?;
                } else {
                    let raw: Vec<u8> = v.extract()?; // bytes, bytearray, memoryview
                    if *utf8 && std::str::from_utf8(&raw).is_err() {
                        return Err(PyValueError::new_err("bytes for a string column are not UTF-8"));
                    }
                    data.push(&raw).map_err(|_| overflow_err())?;
                }
            }
            RowColumn::Words(w) => {
                if none {
                    w.push_null();
                } else {
                    let Ok(s) = v.cast::<PyString>() else {
                        return Err(PyTypeError::new_err(format!("{} is not a str", v.repr()?)));
                    };
                    w.push_str(s)?;
                }
            }
            RowColumn::Object(values) => values.push(v.clone().unbind()),
        }
        Ok(None)
    }

    /// One cell the extension made (`RowColumns::append_cells`); Ok(false): an integer out of
    /// the column's range (nothing pushed).
    fn push_cell(&mut self, py: Python<'_>, cell: &Cell<'_, '_>) -> PyResult<bool> {
        match (self, cell) {
            (col, Cell::Py(v)) => Ok(col.push(v)?.is_none()),
            (RowColumn::Int { values, validity, narrow, .. }, Cell::UInt(v)) => {
                let Some(n) = i64::try_from(*v).ok().filter(|n| !*narrow || i32::try_from(*n).is_ok()) else {
                    return Ok(false);
                };
                values.push(n);
                validity.push(true);
                Ok(true)
            }
            (RowColumn::Int { values, validity, .. }, Cell::Null) => {
                values.push(0);
                validity.push(false);
                Ok(true)
            }
            (RowColumn::Bool { values, validity }, Cell::Null) => {
                values.push(false);
                validity.push(false);
                Ok(true)
            }
            (RowColumn::Bytes { data, .. }, Cell::Null) => {
                data.push_null();
                Ok(true)
            }
            (RowColumn::Bytes { data, utf8: true }, Cell::Str(s)) => {
                data.push(s.as_bytes()).map_err(|_| overflow_err())?;
                Ok(true)
            }
            (RowColumn::Words(w), Cell::Null) => {
                w.push_null();
                Ok(true)
            }
            (RowColumn::Words(w), Cell::Str(s)) => {
                w.push(s.as_bytes()).map_err(|_| overflow_err())?;
                Ok(true)
            }
            (RowColumn::Object(values), Cell::Null) => {
                values.push(py.None());
                Ok(true)
            }
            (_, _) => Err(PyTypeError::new_err("a cell of another type than its column")),
        }
    }

    fn truncate(&mut self, rows: usize) {
        match self {
            RowColumn::Int { values, validity, .. } => {
                values.truncate(rows);
                validity.truncate(rows);
            }
            RowColumn::Bool { values, validity } => {
                values.truncate(rows);
                validity.truncate(rows);
            }
            RowColumn::Bytes { data, .. } => data.truncate(rows),
            RowColumn::Words(w) => w.truncate(rows),
            RowColumn::Object(v) => v.truncate(rows),
        }
    }

    /// The last value pushed, `k` more times (a sequence: the next `k` values after it).
    fn repeat_last(&mut self, py: Python<'_>, k: usize) -> PyResult<()> {
        match self {
            RowColumn::Int { values, validity, narrow, sequence } => {
                let (Some(&last), Some(valid)) = (values.last(), validity.last()) else { return Ok(()) };
                let counting = *sequence && valid;
                if counting {
                    // the values count up: the first that does not fit is named, and none is kept
                    let fits = |i: i64| last.checked_add(i).filter(|v| !*narrow || i32::try_from(*v).is_ok());
                    if fits(k as i64).is_none() {
                        let i = (1..=k as i64).find(|&i| fits(i).is_none()).unwrap_or(k as i64);
                        let what = if *narrow { "an INT (int32)" } else { "a BIGINT (int64)" };
                        return Err(PyOverflowError::new_err(format!("{last} + {i} does not fit {what} column")));
                    }
                    values.extend((1..=k as i64).map(|i| last + i));
                } else {
                    values.resize(values.len() + k, last);
                }
                validity.push_n(valid, k);
            }
            RowColumn::Bool { values, validity } => {
                let (Some(v), Some(valid)) = (values.last(), validity.last()) else { return Ok(()) };
                values.push_n(v, k);
                validity.push_n(valid, k);
            }
            RowColumn::Bytes { data, .. } => data.repeat_last(k).map_err(|_| overflow_err())?,
            RowColumn::Words(w) => w.repeat_last(k),
            RowColumn::Object(values) => {
                let Some(last) = values.last() else { return Ok(()) };
                let copies: Vec<Py<PyAny>> = (0..k).map(|_| last.clone_ref(py)).collect();
                values.extend(copies);
            }
        }
        Ok(())
    }

    /// Int: `(rows, nulls, validity or None, little-endian values)`; Bool: `(rows, nulls,
    /// validity or None, value bitmap)`; Bytes: `Utf8Builder::take`'s; Words: `Words::take`'s;
    /// Object: the list.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.len();
        Ok(match self {
            RowColumn::Int { values, validity, narrow, .. } => {
                let (nulls, bits) = validity.take(py);
                let data = if *narrow {
                    // int32: the values fit (checked as they were appended)
                    let narrowed = values.drain(..).map(|x| x as i32).collect();
                    Bound::new(py, ArrowBuffer { owned: little_endian_i32(narrowed) })?
                } else {
                    handed_over(py, values, little_endian_i64)?
                };
                (rows, nulls, bits, data).into_pyobject(py)?.into_any()
            }
            RowColumn::Bool { values, validity } => {
                let (nulls, bits) = validity.take(py);
                let data = PyBytes::new(py, &values.bytes);
                values.clear();
                (rows, nulls, bits, data).into_pyobject(py)?.into_any()
            }
            RowColumn::Bytes { data, .. } => data.take(py)?.into_any(),
            RowColumn::Words(w) => w.take(py)?.into_any(),
            RowColumn::Object(values) => PyList::new(py, values.drain(..))?.into_any(),
        })
    }
}

/// The columns of one table appended a row at a time (`append(*values)`, in the kinds' order).
#[pyclass(module = "binlog_parser._native_ext")]
pub struct RowColumns {
    cols: Vec<RowColumn>,
    /// the columns' names, for errors
    names: Vec<String>,
    /// the columns' kinds as `new` took them (`EventSink::new` checks them against its layout)
    kinds: Vec<String>,
    rows: usize,
}

#[pymethods]
impl RowColumns {
    /// `kinds`: per column `"int64"`, `"int32"`, `"bool"`, `"utf8"`, `"binary"`, `"words"` (a
    /// string column as a dictionary) or `"object"`
    /// (`"int64_sequence"`, `"int32_sequence"`: see `append_repeated`);
    /// `names`: the columns' names (errors name the column).
    #[new]
    fn new(kinds: Vec<String>, names: Vec<String>) -> PyResult<Self> {
        if names.len() != kinds.len() {
            return Err(PyValueError::new_err("one name per column kind"));
        }
        let cols = kinds
            .iter()
            .map(|k| {
                Ok(match k.as_str() {
                    "int64" | "int32" | "int64_sequence" | "int32_sequence" => RowColumn::Int {
                        values: Vec::new(),
                        validity: Validity::default(),
                        narrow: k.starts_with("int32"),
                        sequence: k.ends_with("_sequence"),
                    },
                    "bool" => RowColumn::Bool { values: Bits::default(), validity: Validity::default() },
                    "utf8" | "binary" => RowColumn::Bytes { data: Utf8Builder::default(), utf8: k == "utf8" },
                    "words" => RowColumn::Words(Words::default()),
                    "object" => RowColumn::Object(Vec::new()),
                    other => return Err(PyValueError::new_err(format!("unknown column kind {other}"))),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(RowColumns { cols, names, kinds, rows: 0 })
    }

    pub(crate) fn __len__(&self) -> usize {
        self.rows
    }

    /// One row, a value per column. An integer out of its column's range is stored as NULL
    /// and named in the answer: None when every value fits, else a list of
    /// `"<column>: <value> does not fit ... column"`. On an error (a value of another type,
    /// text that is not UTF-8) nothing of the row is kept.
    #[pyo3(signature = (*values))]
    pub(crate) fn append<'py>(&mut self, values: &Bound<'py, PyTuple>) -> PyResult<Option<Bound<'py, PyList>>> {
        if values.len() != self.cols.len() {
            return Err(PyTypeError::new_err(format!("a row has {} values, not {}", self.cols.len(), values.len())));
        }
        let py = values.py();
        let mut misfits: Option<Bound<'py, PyList>> = None;
        for (i, (col, v)) in self.cols.iter_mut().zip(values.iter()).enumerate() {
            match col.push(&v) {
                Ok(None) => {}
                Ok(Some(why)) => misfits.get_or_insert_with(|| PyList::empty(py)).append(format!("{}: {why}", self.names[i]))?,
                Err(e) => {
                    self.truncate_rows(self.rows);
                    return Err(PyErr::from_type(e.get_type(py), format!("{}: {}", self.names[i], e.value(py))));
                }
            }
        }
        self.rows += 1;
        Ok(misfits)
    }

    /// The same row `n` times in one call (the rows of one rows event share its columns), but
    /// a sequence column counts up: its value, then +1 per copy. On an error nothing is kept.
    #[pyo3(signature = (n, *values))]
    pub(crate) fn append_repeated<'py>(&mut self, n: usize, values: &Bound<'py, PyTuple>) -> PyResult<Option<Bound<'py, PyList>>> {
        if n == 0 {
            return Ok(None);
        }
        let misfits = self.append(values)?;
        self.repeat_row(values.py(), n)?;
        Ok(misfits)
    }

    /// Every column's buffers (`RowColumn::take`), in order; the columns are emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = self.cols.iter_mut().map(|c| c.take(py)).collect::<PyResult<Vec<_>>>()?;
        self.rows = 0;
        PyList::new(py, out)
    }
}

impl RowColumns {
    /// `(name, kind)` of each column, in order, as `new` took them.
    pub(crate) fn layout(&self) -> impl Iterator<Item = (&str, &str)> {
        self.names.iter().map(String::as_str).zip(self.kinds.iter().map(String::as_str))
    }

    /// One row of cells the extension made, a cell per column (`EventSink`: no Python object
    /// per integer or text it writes). Ok(false): an integer out of its column's range; on that
    /// or an error nothing of the row is kept.
    pub(crate) fn append_cells(&mut self, py: Python<'_>, cells: &[Cell<'_, '_>]) -> PyResult<bool> {
        if cells.len() != self.cols.len() {
            return Err(PyTypeError::new_err(format!("a row has {} values, not {}", self.cols.len(), cells.len())));
        }
        for (i, (col, cell)) in self.cols.iter_mut().zip(cells).enumerate() {
            let pushed = col.push_cell(py, cell)
                .map_err(|e| PyErr::from_type(e.get_type(py), format!("{}: {}", self.names[i], e.value(py))));
            if !matches!(pushed, Ok(true)) {
                self.truncate_rows(self.rows);
                return pushed;
            }
        }
        self.rows += 1;
        Ok(true)
    }

    /// `append_cells`, then the row `n - 1` more times as `append_repeated` repeats it.
    pub(crate) fn append_cells_repeated(&mut self, py: Python<'_>, n: usize, cells: &[Cell<'_, '_>]) -> PyResult<bool> {
        if n == 0 {
            return Ok(true);
        }
        if !self.append_cells(py, cells)? {
            return Ok(false);
        }
        self.repeat_row(py, n)
    }

    /// The row just appended `n - 1` more times (`append_repeated`); on an error the row is
    /// taken back.
    fn repeat_row(&mut self, py: Python<'_>, n: usize) -> PyResult<bool> {
        for i in 0..self.cols.len() {
            if let Err(e) = self.cols[i].repeat_last(py, n - 1) {
                self.truncate_rows(self.rows - 1);
                return Err(PyErr::from_type(e.get_type(py), format!("{}: {}", self.names[i], e.value(py))));
            }
        }
        self.rows += n - 1;
        Ok(true)
    }

    /// Every column back to its first `rows` values (a row that failed part way, an event
    /// `sink::EventSink` declines after appending).
    pub(crate) fn truncate_rows(&mut self, rows: usize) {
        for c in &mut self.cols {
            c.truncate(rows);
        }
        self.rows = self.rows.min(rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_each_word_once_and_an_index_per_row() {
        // never dropped: its `str` objects' drop needs Python, which the tests do not link
        let mut w = std::mem::ManuallyDrop::new(Words::default());
        w.push_null(); // index 0 before any word: a NULL row's, never read
        w.push(b"").unwrap(); // the empty word after it is a word of its own
        w.push(b"WRITE_ROWS").unwrap();
        w.push(b"XID").unwrap();
        w.push(b"WRITE_ROWS").unwrap();
        w.repeat_last(2);
        w.push(b"").unwrap();
        assert_eq!(w.indices, vec![0, 0, 1, 2, 1, 1, 1, 0]);
        let words: Vec<&[u8]> = (0..w.words.words.len()).map(|i| w.words.words.value(i)).collect();
        assert_eq!(words, vec![&b""[..], b"WRITE_ROWS", b"XID"]);
        assert_eq!((w.validity.len(), w.validity.nulls), (8, 1));
        w.truncate(3);
        assert_eq!((w.indices.clone(), w.validity.len(), w.validity.nulls), (vec![0, 0, 1], 3, 1));
        w.push(b"XID").unwrap(); // still known after the cut
        assert_eq!((w.indices[3], w.words.words.len()), (2, 3));
    }

    #[test]
    fn push_n_is_push_k_times_from_any_bit() {
        for before in 0..17usize {
            for k in 0..27usize {
                for bit in [false, true] {
                    let (mut got, mut want) = (Bits::default(), Bits::default());
                    for i in 0..before {
                        got.push(i % 3 == 0);
                        want.push(i % 3 == 0);
                    }
                    got.push_n(bit, k);
                    for _ in 0..k {
                        want.push(bit);
                    }
                    assert_eq!((got.len, &got.bytes), (want.len, &want.bytes), "{before} {k} {bit}");
                    got.truncate(before / 2);
                    want.truncate(before / 2);
                    got.push_n(bit, k);
                    for _ in 0..k {
                        want.push(bit);
                    }
                    assert_eq!((got.len, &got.bytes), (want.len, &want.bytes), "after a cut: {before} {k} {bit}");
                }
            }
        }
    }

    #[test]
    fn a_cut_drops_both_sides_of_the_changes_after_it() {
        let mut images = ImageColumns::default();
        images.jsons[0].push(b"{}").unwrap();
        images.jsons[1].push_null();
        images.jsons[0].push(b"{\"id\":2}").unwrap(); // the next change fails in its after image
        images.truncate_to(1);
        assert_eq!((images.jsons[0].len(), images.jsons[1].len()), (1, 1));
        images.truncate_to(0);
        assert_eq!((images.jsons[0].len(), images.jsons[1].len()), (0, 0));
    }
}
