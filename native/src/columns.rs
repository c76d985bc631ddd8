//! Arrow column buffers filled in Rust: `ImageColumns`, the four row image columns of
//! `silver.row_changes` (two `map<string,string>`, two JSON strings).
//!
//! `render_changes_into` writes each rendered value's bytes straight into these buffers, so no
//! Python `str` is made per value and no Python list is walked by `pa.array` per batch: `take`
//! hands the buffers over as `bytes` (Arrow's own layout: validity bitmap, i32 offsets, UTF-8
//! data), and `spark_jobs.columns` wraps them as Arrow arrays without another pass over the values.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

/// Why a value cannot go into a buffer: an Arrow string array holds at most 2 GiB - 1 bytes.
pub(crate) struct Overflow;

fn overflow_err() -> PyErr {
    PyOverflowError::new_err("silver.row_changes: the row images of one batch pass 2 GiB (an Arrow string column's limit)")
}

/// An Arrow validity bitmap being built (bit set: a value), with its NULL count.
#[derive(Default)]
struct Validity {
    bits: Vec<u8>,
    len: usize,
    nulls: usize,
}

impl Validity {
    fn push(&mut self, valid: bool) {
        if self.len.is_multiple_of(8) {
            self.bits.push(0);
        }
        if valid {
            self.bits[self.len / 8] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }

    fn truncate(&mut self, len: usize) {
        while self.len > len {
            self.len -= 1;
            let (byte, bit) = (self.len / 8, 1u8 << (self.len % 8));
            if self.bits[byte] & bit == 0 {
                self.nulls -= 1;
            }
            self.bits[byte] &= !bit;
        }
        self.bits.truncate(len.div_ceil(8));
    }

    /// The bitmap as `bytes`, or None when no value is NULL (Arrow's "all valid").
    fn take<'py>(&mut self, py: Python<'py>) -> (usize, Option<Bound<'py, PyBytes>>) {
        let nulls = self.nulls;
        let bits = (nulls > 0).then(|| PyBytes::new(py, &self.bits));
        *self = Validity::default();
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

    /// One value: `bytes` (valid UTF-8).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
        let end = i32::try_from(self.data.len() + bytes.len()).map_err(|_| Overflow)?;
        self.data.extend_from_slice(bytes);
        self.offsets.push(end);
        self.validity.push(true);
        Ok(())
    }

    pub(crate) fn push_null(&mut self) {
        self.offsets.push(*self.offsets.last().unwrap_or(&0));
        self.validity.push(false);
    }

    /// One value: an exact `str`, or None (NULL).
    fn push_py(&mut self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        if v.is_none() {
            self.push_null();
            return Ok(());
        }
        let s = v.cast::<PyString>()?.to_str()?; // lone surrogates: UnicodeEncodeError, as pa.array
        self.push(s.as_bytes()).map_err(|_| overflow_err())
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows + 1);
        self.data.truncate(self.offsets[rows] as usize);
        self.validity.truncate(rows);
    }

    /// `(rows, nulls, validity or None, offsets, data)`; the builder is emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rows = self.len();
        let (nulls, validity) = self.validity.take(py);
        let offsets = PyBytes::new(py, &i32_bytes(&self.offsets));
        let data = PyBytes::new(py, &self.data);
        *self = Utf8Builder::default();
        (rows, nulls, validity, offsets, data).into_pyobject(py)
    }
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An Arrow `map<string,string>` column being built: its entries' keys and values, one end
/// offset per row (a NULL map has no entries).
pub(crate) struct MapBuilder {
    pub(crate) keys: Utf8Builder,
    pub(crate) values: Utf8Builder,
    offsets: Vec<i32>,
    validity: Validity,
}

impl Default for MapBuilder {
    fn default() -> Self {
        MapBuilder { keys: Utf8Builder::default(), values: Utf8Builder::default(), offsets: vec![0], validity: Validity::default() }
    }
}

impl MapBuilder {
    fn rows(&self) -> usize {
        self.validity.len
    }

    /// Ends the row whose entries were pushed since the last one (`valid`: a map, not NULL).
    pub(crate) fn end_row(&mut self, valid: bool) -> Result<(), Overflow> {
        self.offsets.push(i32::try_from(self.keys.len()).map_err(|_| Overflow)?);
        self.validity.push(valid);
        Ok(())
    }

    fn truncate(&mut self, rows: usize) {
        self.offsets.truncate(rows + 1);
        let entries = self.offsets[rows] as usize;
        self.keys.truncate(entries);
        self.values.truncate(entries);
        self.validity.truncate(rows);
    }

    /// One row from Python: a dict of str -> str or None, or None.
    fn push_py(&mut self, image: &Bound<'_, PyAny>) -> PyResult<()> {
        if image.is_none() {
            return self.end_row(false).map_err(|_| overflow_err());
        }
        let dict = image.cast::<PyDict>().map_err(|_| PyTypeError::new_err("a row image's text map is a dict"))?;
        for (key, value) in dict.iter() {
            if key.is_none() {
                return Err(PyTypeError::new_err("a row image's column name is None"));
            }
            self.keys.push_py(&key)?;
            self.values.push_py(&value)?;
        }
        self.end_row(true).map_err(|_| overflow_err())
    }

    /// `(rows, nulls, validity or None, offsets, keys, values)` (`Utf8Builder::take` each);
    /// the builder is emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rows = self.rows();
        let (nulls, validity) = self.validity.take(py);
        let offsets = PyBytes::new(py, &i32_bytes(&self.offsets));
        let keys = self.keys.take(py)?;
        let values = self.values.take(py)?;
        *self = MapBuilder::default();
        (rows, nulls, validity, offsets, keys, values).into_pyobject(py)
    }
}

/// The row image columns of `silver.row_changes` being built: per side (before, after) the
/// text map and the JSON text of each change's image.
#[pyclass(module = "binlog_parser._native_ext")]
#[derive(Default)]
pub struct ImageColumns {
    pub(crate) maps: [MapBuilder; 2],
    pub(crate) jsons: [Utf8Builder; 2],
}

impl ImageColumns {
    /// Back to the first `changes` changes (none: as it is).
    pub(crate) fn truncate_to(&mut self, changes: usize) {
        if changes >= self.jsons[0].len() {
            return;
        }
        for m in &mut self.maps {
            m.truncate(changes);
        }
        for j in &mut self.jsons {
            j.truncate(changes);
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

    /// One change's images, rendered by Python: each side's text map (a dict, or None for no
    /// image) and JSON text (or None). On an error nothing is appended.
    fn append(&mut self, before: &Bound<'_, PyAny>, after: &Bound<'_, PyAny>, before_json: &Bound<'_, PyAny>,
              after_json: &Bound<'_, PyAny>) -> PyResult<()> {
        let mark = self.jsons[0].len();
        let result = (|| {
            self.maps[0].push_py(before)?;
            self.maps[1].push_py(after)?;
            self.jsons[0].push_py(before_json)?;
            self.jsons[1].push_py(after_json)
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

    /// `(before map, after map, before JSON, after JSON)` as buffers (see `MapBuilder::take`,
    /// `Utf8Builder::take`); the columns are emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let [b, a] = &mut self.maps;
        let [bj, aj] = &mut self.jsons;
        (b.take(py)?, a.take(py)?, bj.take(py)?, aj.take(py)?).into_pyobject(py)
    }
}
