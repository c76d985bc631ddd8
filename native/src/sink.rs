//! `EventSink`: the ingest's rows of TABLE_MAP and rows events appended inside the compiled
//! framing loop (`framing.rs`), so those events never reach the Python loop of
//! `spark_jobs.records.RangeDecoder` (issue 13: they are 44% of an OLTP binlog's events, and
//! that loop's per-event Python was the largest share of the ingest's CPU).
//!
//! The sink does only what the Python loop would do for such an event, with what the Python
//! loop handed it: the buffers it appends to (`RowColumns` of `bronze.events` and
//! `silver.row_changes`, the row image `ImageColumns`), the open transaction's GTID and start,
//! and per table what the Python loop worked out the first time it met the table (the
//! TABLE_MAP's fields JSON, a rows event's head JSON and image layouts). It takes an event only
//! when all of that is known and the event is plain: top level (not in a TRANSACTION_PAYLOAD), in
//! an open transaction, its images kept as bytes (`RowImages`), and appending it leaves every
//! buffer short of the point where the Python loop cuts a batch or flushes the transaction's
//! rows. Anything else is declined and the Python loop handles the event as ever; so the
//! tables are the same rows in the same order with or without the sink.
//!
//! What the Python loop keeps per transaction (events, tables, rows waiting for the commit
//! time, ...) is counted here and handed over by `take`, which the Python loop calls before it
//! handles its next event.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::columns::{ImageColumns, RowColumns};
use crate::render::{render_changes_into, ImageLayout};
use crate::{uint, RowImages};

const TABLE_MAP: u8 = 19;
/// 9999-12-31T23:59:59: the last second a TIMESTAMP column holds (`records._MAX_TS`)
const MAX_TS: u64 = 253_402_300_799;

/// What `bronze.events` holds of a TABLE_MAP, as the Python loop rendered it.
struct TableMapRow {
    /// the event's decoded columns: a repeat of the same TABLE_MAP shares them
    columns: Py<PyAny>,
    fields_json: Py<PyString>,
    db: Py<PyAny>,
    table: Py<PyAny>,
}

/// Where a table's row changes go: `bronze.events.db` / `table_name`, `silver.row_changes.db`
/// / `table_name` (never NULL), the transaction's `tables` entry (`db.table`, None for neither).
type RowsWhere = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Option<Py<PyAny>>);

/// What the rows of one table's rows events share, as the Python loop made it.
struct RowsHead {
    /// the TABLE_MAP's decoded columns (`event.table.columns`)
    columns: Py<PyAny>,
    extra_data: Py<PyAny>,
    /// `bronze.events.fields` up to its row count (`records.rows_fields_json`)
    head_json: String,
    /// `bronze.events.db` / `table_name`
    db: Py<PyAny>,
    table: Py<PyAny>,
    /// `silver.row_changes.db` / `table_name` (never NULL)
    db_text: Py<PyAny>,
    table_text: Py<PyAny>,
    /// the transaction's `tables` entry (`db.table`), None for neither
    table_key: Option<Py<PyAny>>,
    before: Option<Py<ImageLayout>>,
    after: Option<Py<ImageLayout>>,
}

#[pyclass(module = "binlog_parser._native_ext")]
pub struct EventSink {
    events: Py<RowColumns>,
    row_changes: Py<RowColumns>,
    images: Py<ImageColumns>,
    /// type code -> `event.name`; rows type code -> `silver.row_changes.operation`
    names: Py<PyDict>,
    operations: Py<PyDict>,
    batch_rows: usize,
    max_pending: usize,
    table_maps: HashMap<u64, TableMapRow>,
    rows_heads: HashMap<(u64, u8, u64), RowsHead>,
    /// the open transaction's `gtid` and `trx_pos` columns (None: no transaction is open)
    trx: Option<(Py<PyAny>, Py<PyAny>)>,
    /// rows of the open transaction waiting for its commit time in the Python loop
    #[pyo3(get, set)]
    pending_base: usize,
    /// events taken since the last `take`
    #[pyo3(get)]
    seen: usize,
    next_pos: u64,
    first_us: Option<u64>,
    last_us: Option<u64>,
    rows: usize,
    tables: Vec<Py<PyAny>>,
    pending: Vec<(Option<u64>, usize)>,
}

#[pymethods]
impl EventSink {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(events: Py<RowColumns>, row_changes: Py<RowColumns>, images: Py<ImageColumns>, names: Py<PyDict>,
           operations: Py<PyDict>, batch_rows: usize, max_pending: usize) -> Self {
        EventSink {
            events, row_changes, images, names, operations, batch_rows, max_pending,
            table_maps: HashMap::new(),
            rows_heads: HashMap::new(),
            trx: None,
            pending_base: 0,
            seen: 0,
            next_pos: 0,
            first_us: None,
            last_us: None,
            rows: 0,
            tables: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// A transaction opened: its `gtid` and `trx_pos` columns.
    fn open(&mut self, gtid: Py<PyAny>, trx_pos: Py<PyAny>) {
        self.trx = Some((gtid, trx_pos));
        self.pending_base = 0;
    }

    /// The open transaction ended (its events were taken before).
    fn close(&mut self) {
        self.trx = None;
        self.pending_base = 0;
    }

    /// A TABLE_MAP's `bronze.events` values, for its repeats (the same `columns` object).
    fn remember_table_map(&mut self, table_id: u64, columns: Py<PyAny>, fields_json: Py<PyString>, db: Py<PyAny>,
                          table: Py<PyAny>) {
        if self.table_maps.len() >= 4096 {
            self.table_maps.clear();
        }
        self.table_maps.insert(table_id, TableMapRow { columns, fields_json, db, table });
    }

    /// What the rows events of a table (`table_id`, type code, flags, extra data, while its
    /// TABLE_MAP's `columns` are the same) share; `names`: `(db, table, db or "", table or "",
    /// "db.table" or None)`.
    #[allow(clippy::too_many_arguments)]
    fn remember_rows(&mut self, table_id: u64, type_code: u8, flags: u64, extra_data: Py<PyAny>, columns: Py<PyAny>,
                     head_json: String, names: RowsWhere,
                     before: Option<Py<ImageLayout>>, after: Option<Py<ImageLayout>>) {
        if self.rows_heads.len() >= 4096 {
            self.rows_heads.clear();
        }
        let (db, table, db_text, table_text, table_key) = names;
        self.rows_heads.insert((table_id, type_code, flags), RowsHead {
            columns, extra_data, head_json, db, table, db_text, table_text, table_key, before, after,
        });
    }

    /// What the events taken since the last call add to the range and its open transaction:
    /// `(events, next_pos, first_us, last_us, row_changes, tables, pending)`, `pending` being
    /// `(event_us, rows)` per rows event, in order. Counts restart from zero.
    #[allow(clippy::type_complexity)]
    fn take<'py>(&mut self, py: Python<'py>)
                 -> PyResult<(usize, u64, Option<u64>, Option<u64>, usize, Bound<'py, PyList>, Bound<'py, PyList>)> {
        let tables = PyList::new(py, self.tables.drain(..))?;
        let pending = PyList::new(py, self.pending.drain(..))?;
        let out = (self.seen, self.next_pos, self.first_us, self.last_us, self.rows, tables, pending);
        self.pending_base += self.rows;
        self.seen = 0;
        self.rows = 0;
        self.first_us = None;
        self.last_us = None;
        Ok(out)
    }
}

/// An event's header as the framing loop read it.
pub(crate) struct Place {
    pub pos: u64,
    pub next_pos: u64,
    pub type_code: u8,
    /// timestamp, server_id, event_size, log_pos, flags
    pub fields: [u64; 5],
    pub checksum_ok: Option<bool>,
}

impl EventSink {
    /// Append `event` (a top-level event, just decoded) when it is a TABLE_MAP or rows event
    /// the sink can take; false: the Python loop handles it. On false nothing was appended.
    pub(crate) fn take_event(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        if self.trx.is_none() {
            return Ok(false);
        }
        if at.type_code == TABLE_MAP {
            self.table_map(py, event, at)
        } else if matches!(at.type_code, 23..=25 | 30..=32) {
            self.rows_event(py, event, at)
        } else {
            Ok(false)
        }
    }

    fn table_map(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let table_id: u64 = event.getattr(pyo3::intern!(py, "table_id"))?.extract()?;
        let Some(row) = self.table_maps.get(&table_id) else { return Ok(false) };
        if !event.getattr(pyo3::intern!(py, "columns"))?.is(&row.columns) {
            return Ok(false);
        }
        let mut events = self.events.bind(py).try_borrow_mut()?;
        if events.__len__() + 1 >= self.batch_rows {
            return Ok(false);
        }
        let (fields_json, db, table) = (row.fields_json.clone_ref(py).into_any(), row.db.clone_ref(py), row.table.clone_ref(py));
        let event_us = event_us(at);
        if !self.append_event(py, &mut events, at, event_us, db, table, fields_json)? {
            return Ok(false);
        }
        self.taken(at, event_us);
        Ok(true)
    }

    fn rows_event(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let rows = event.getattr(pyo3::intern!(py, "rows"))?;
        let Ok(images) = rows.cast::<RowImages>() else { return Ok(false) };
        let n = images.get().len();
        if self.pending_base + self.rows + n >= self.max_pending {
            return Ok(false); // the Python loop flushes the transaction's rows after this one
        }
        let table_id: u64 = event.getattr(pyo3::intern!(py, "table_id"))?.extract()?;
        let flags: u64 = event.getattr(pyo3::intern!(py, "flags"))?.extract()?;
        let Some(head) = self.rows_heads.get(&(table_id, at.type_code, flags)) else { return Ok(false) };
        let table = event.getattr(pyo3::intern!(py, "table"))?;
        if table.is_none() || !table.getattr(pyo3::intern!(py, "columns"))?.is(&head.columns)
            || !event.getattr(pyo3::intern!(py, "extra_data"))?.eq(head.extra_data.bind(py))? {
            return Ok(false);
        }
        let Some(operation) = self.operations.bind(py).get_item(at.type_code)? else { return Ok(false) };
        let mut events = self.events.bind(py).try_borrow_mut()?;
        let mut changes = self.row_changes.bind(py).try_borrow_mut()?;
        if events.__len__() + 1 >= self.batch_rows || changes.__len__() + n >= self.batch_rows {
            return Ok(false);
        }
        let image_sink = self.images.bind(py);
        let mark = image_sink.borrow().__len__();
        let (before, after) = (head.before.as_ref().map(|l| l.bind(py)), head.after.as_ref().map(|l| l.bind(py)));
        // the images first: on a fallback the sink is as it was and nothing else is appended
        if n > 0 && render_changes_into(py, &rows, before, after, image_sink) != Some(n) {
            return Ok(false);
        }
        let undo_images = |sink: &Bound<'_, ImageColumns>| sink.borrow_mut().truncate_to(mark);
        let fields_json = PyString::new(py, &format!(
            "{},\"row_count\":{n},\"row_images\":\"silver.row_changes\"}}", head.head_json)).into_any().unbind();
        let event_us = event_us(at);
        let (db, table_name) = (head.db.clone_ref(py), head.table.clone_ref(py));
        let marks = (events.__len__(), changes.__len__());
        if !self.append_event(py, &mut events, at, event_us, db, table_name, fields_json)? {
            undo_images(image_sink);
            return Ok(false);
        }
        let head = &self.rows_heads[&(table_id, at.type_code, flags)];
        let (gtid, trx_pos) = self.trx.as_ref().expect("checked by take_event");
        let name = self.name(py, at.type_code)?;
        let values = PyTuple::new(py, [
            uint(py, at.pos), py.None().into_bound(py), uint(py, 0), gtid.bind(py).clone(), trx_pos.bind(py).clone(),
            opt_uint(py, event_us), uint(py, at.fields[1]), head.db_text.bind(py).clone(), head.table_text.bind(py).clone(),
            operation, name,
        ])?;
        match changes.append_repeated(n, &values) {
            Ok(None) => {}
            _ => {
                // never expected (the values are the header's): leave the event to the Python loop
                changes.truncate_rows(marks.1);
                events.truncate_rows(marks.0);
                undo_images(image_sink);
                return Ok(false);
            }
        }
        if let Some(key) = &head.table_key {
            self.tables.push(key.clone_ref(py));
        }
        self.pending.push((event_us, n));
        self.rows += n;
        self.taken(at, event_us);
        Ok(true)
    }

    /// The event's `bronze.events` row (false, nothing appended: let the Python loop do it).
    #[allow(clippy::too_many_arguments)]
    fn append_event(&self, py: Python<'_>, events: &mut RowColumns, at: &Place, event_us: Option<u64>, db: Py<PyAny>,
                    table: Py<PyAny>, fields_json: Py<PyAny>) -> PyResult<bool> {
        let (gtid, trx_pos) = self.trx.as_ref().expect("checked by take_event");
        let [_, server_id, size, log_pos, flags] = at.fields;
        let checksum = match at.checksum_ok {
            None => pyo3::intern!(py, "none"),
            Some(true) => pyo3::intern!(py, "ok"),
            Some(false) => pyo3::intern!(py, "bad"),
        };
        let none = || py.None().into_bound(py);
        let values = PyTuple::new(py, [
            uint(py, at.pos), none(), none(), uint(py, at.next_pos), uint(py, at.type_code as u64),
            self.name(py, at.type_code)?, opt_uint(py, event_us), uint(py, server_id), uint(py, size), uint(py, log_pos),
            uint(py, flags), checksum.clone().into_any(), gtid.bind(py).clone(), trx_pos.bind(py).clone(),
            db.into_bound(py), table.into_bound(py), fields_json.into_bound(py), none(),
        ])?;
        let rows = events.__len__();
        match events.append(&values) {
            Ok(None) => Ok(true),
            Ok(Some(_)) => {
                // a value that does not fit (never expected of a header): the Python loop
                // stores it as NULL and quarantines it
                events.truncate_rows(rows);
                Ok(false)
            }
            Err(_) => Ok(false),
        }
    }

    fn name<'py>(&self, py: Python<'py>, type_code: u8) -> PyResult<Bound<'py, PyAny>> {
        match self.names.bind(py).get_item(type_code)? {
            Some(name) => Ok(name),
            None => Err(pyo3::exceptions::PyKeyError::new_err(type_code)),
        }
    }

    fn taken(&mut self, at: &Place, event_us: Option<u64>) {
        self.seen += 1;
        self.next_pos = at.next_pos;
        if let Some(us) = event_us {
            self.first_us = Some(self.first_us.map_or(us, |f| f.min(us)));
            self.last_us = Some(self.last_us.map_or(us, |l| l.max(us)));
        }
    }
}

/// The header timestamp in microseconds (`RangeDecoder._event_time`): None past what a
/// TIMESTAMP holds.
fn event_us(at: &Place) -> Option<u64> {
    let seconds = at.fields[0];
    (seconds <= MAX_TS).then_some(seconds * 1_000_000)
}

fn opt_uint(py: Python<'_>, v: Option<u64>) -> Bound<'_, PyAny> {
    match v {
        Some(v) => uint(py, v),
        None => py.None().into_bound(py),
    }
}
