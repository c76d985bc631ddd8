//! `EventSink`: the ingest's rows of plain transactions appended inside the compiled framing
//! loop (`framing.rs`), so their events never reach the Python loop of
//! `binlake.ingest.records.RangeDecoder` (issue 13: that loop's per-event Python was the largest
//! share of the ingest's CPU). A plain transaction is what an OLTP server writes for most of its
//! commits: GTID (ANONYMOUS_GTID, MariaDB's GTID), BEGIN (not after a MariaDB GTID), the
//! statement's annotation (ROWS_QUERY, MariaDB's ANNOTATE_ROWS), TABLE_MAP and rows events, XID.
//!
//! The sink does only what the Python loop would do for such an event, with what the Python
//! loop handed it: the buffers it appends to (the `RowColumns` of `bronze.events`,
//! `silver.row_changes`, its commit times and `silver.transactions`, the row image
//! `ImageColumns`), the open transaction's GTID and start, and per table what the Python loop
//! worked out the first time it met the table (the TABLE_MAP's fields JSON, a rows event's head
//! JSON and image layouts). It takes an event only when all of that is known and the event is
//! plain: top level (not in a TRANSACTION_PAYLOAD), its images kept as bytes (`RowImages`), and
//! appending it leaves every buffer short of the point where the Python loop cuts a batch or
//! flushes the transaction's rows. It takes TABLE_MAP and rows events and annotations in any open
//! transaction; a GTID only when no transaction is open, and then the BEGIN right after it and
//! the XID that ends it, appending the `silver.transactions` row and the row changes' commit time
//! as `RangeDecoder._close_trx` does. Anything else is declined and the Python loop handles the
//! event as ever; so the tables are the same rows in the same order with or without the sink.
//!
//! The framing loop first offers such an event as its framed bytes (`take_bytes`) and builds the
//! Python event only when the sink declines them: a GTID or XID is decoded here as `events.rs`
//! decodes it, and a BEGIN, TABLE_MAP or rows event is taken when its bytes are those of one the
//! sink was shown (for a TABLE_MAP and a rows event, while the context's TABLE_MAP of the table
//! is still that one). Building the objects only to read them back was most of what was left of
//! the loop's time.
//!
//! What the Python loop keeps per range and per transaction (events, GTIDs, tables, rows waiting
//! for the commit time, ...) is counted here and handed over by `take`, which the Python loop
//! calls before it handles its next event; a transaction the sink opened and has not ended then
//! becomes the Python loop's.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::columns::{Cell, ImageColumns, RowColumns};
use crate::events::{gtid_parts, xid_value, GtidParts};
use crate::fields::{fields_text, FieldsLayout};
use crate::render::{images_from_data, render_changes_into, Changes, ImageLayout};
use crate::short_copy::append_str;
use crate::{le, rows_event_head, sides, uint, EventBytes, ImageReader, RowImages};

const QUERY: u8 = 2;
const XID: u8 = 16;
const TABLE_MAP: u8 = 19;
const ROWS_QUERY: u8 = 29;
const GTID: u8 = 33;
const ANONYMOUS_GTID: u8 = 34;
const MARIA_ANNOTATE_ROWS: u8 = 160;
const MARIA_GTID: u8 = 162;
/// 9999-12-31T23:59:59: the last second a TIMESTAMP column holds (`records._MAX_TS`)
const MAX_TS: u64 = 253_402_300_799;
const MAX_US: u64 = MAX_TS * 1_000_000;

/// The `RowColumns` the sink appends to, as `(role, table, columns)`: each buffer's columns in
/// the order of the sink's cells, with the kind each must have. The ingest declares the same
/// from the table registry (`binlake.ingest.layout.sink_layout`); `EventSink::new` refuses
/// buffers of any other layout, and `tests/test_native_sink_layout.py` holds the two equal, so
/// a change of the silver or bronze columns fails there instead of filling the wrong column.
pub(crate) type Layout = [(&'static str, &'static str, &'static [(&'static str, &'static str)]); 4];
pub(crate) const SINK_LAYOUT: Layout = [
    ("events", "bronze.events", &[
        ("pos", "int64"), ("payload_index", "int32"), ("payload_offset", "int64"), ("next_pos", "int64"),
        ("type_code", "int32"), ("event_type", "words"), ("event_time", "int64"), ("server_id", "int64"),
        ("event_size", "int64"), ("log_pos", "int64"), ("flags", "int32"), ("checksum", "words"), ("gtid", "words"),
        ("trx_pos", "int64"), ("db", "words"), ("table_name", "words"), ("fields", "utf8"), ("raw", "binary"),
    ]),
    ("row_changes", "silver.row_changes", &[
        ("pos", "int64"), ("payload_index", "int32"), ("row_index", "int32_sequence"), ("gtid", "words"),
        ("trx_pos", "int64"), ("event_time", "int64"), ("server_id", "int64"), ("db", "words"), ("table_name", "words"),
        ("operation", "words"), ("event_type", "words"),
    ]),
    ("commit_times", "silver.row_changes", &[("commit_time", "int64")]),
    ("transactions", "silver.transactions", &[
        ("start_pos", "int64"), ("end_pos", "int64"), ("gtid", "utf8"), ("gtid_kind", "utf8"), ("uuid", "utf8"),
        ("tag", "utf8"), ("gno", "int64"), ("mariadb_domain_id", "int64"), ("mariadb_server_id", "int64"),
        ("mariadb_seq_no", "int64"), ("last_committed", "int64"), ("sequence_number", "int64"), ("begin_time", "int64"),
        ("commit_time", "int64"), ("original_commit_time", "int64"), ("immediate_commit_time", "int64"),
        ("original_server_version", "int64"), ("immediate_server_version", "int64"), ("transaction_length", "int64"),
        ("server_id", "int64"), ("xid", "int64"), ("events", "int32"), ("row_changes", "int64"),
        ("statements", "object"), ("tables", "object"), ("kind", "utf8"), ("end_event", "utf8"), ("complete", "bool"),
    ]),
];

/// Why `buffer` is not the sink's `(role, table, columns)` (None: it is).
fn layout_mismatch(py: Python<'_>, buffer: &Py<RowColumns>, (role, table, columns): (&str, &str, &[(&str, &str)]))
                   -> Option<String> {
    let given = buffer.bind(py).borrow();
    let given: Vec<(String, String)> = given.layout().map(|(n, k)| (n.to_string(), k.to_string())).collect();
    let wanted: Vec<(String, String)> = columns.iter().map(|(n, k)| (format!("{table}.{n}"), k.to_string())).collect();
    if given == wanted {
        return None;
    }
    let at = given.iter().zip(&wanted).position(|(g, w)| g != w).unwrap_or(given.len().min(wanted.len()));
    let show = |v: &[(String, String)]| v.get(at).map_or("nothing".to_string(), |(n, k)| format!("{n} ({k})"));
    Some(format!("the {role} buffer's column {at} is {}, the event sink appends {} there ({} columns given, {} \
                  expected): rebuild the extension (make setup-native) or change native/src/sink.rs with the registry",
                 show(&given), show(&wanted), given.len(), wanted.len()))
}

/// What `bronze.events` holds of a TABLE_MAP, as the Python loop rendered it.
struct TableMapRow {
    /// the event's decoded columns: a repeat of the same TABLE_MAP shares them
    columns: Py<PyAny>,
    fields_json: Py<PyString>,
    db: Py<PyAny>,
    table: Py<PyAny>,
    /// the TABLE_MAP's bytes as framed, when the framing loop noted them (`RawTableMap`)
    raw: Option<RawTableMap>,
}

/// A TABLE_MAP the framing loop handed out, as it framed it: a repeat of these bytes under the
/// same post-header length and server version decodes to the same event (the parser's TABLE_MAP
/// cache holds them as one), so the sink takes it from its bytes (`take_bytes`).
struct RawTableMap {
    table_id: u64,
    body: Vec<u8>,
    post_header_length: u8,
    server_version: Py<PyAny>,
}

/// What a table's rows events repeat after their table id and flags, as in the rows event the
/// Python loop was shown, and the readers of its images (`take_bytes`): another rows event
/// with the same bytes there, while the table's TABLE_MAP is the same, is read the same way.
struct RawRowsHead {
    extra_data: Vec<u8>,
    width: u64,
    present: Vec<u8>,
    present_after: Option<Vec<u8>>,
    kind: u32,
    first: Py<ImageReader>,
    second: Option<Py<ImageReader>>,
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
    raw: Option<RawRowsHead>,
}

/// A transaction the sink opened (it took its GTID): its `silver.transactions` values
/// (`records._Trx`) but the counts, which the sink keeps for any open transaction.
struct OwnTrx {
    start_pos: u64,
    begin_us: Option<u64>,
    server_id: u64,
    gtid: Py<PyAny>,
    kind: GtidKind,
    uuid: Py<PyAny>,
    gno: Py<PyAny>,
    /// MariaDB's domain id and sequence number (its server id is `server_id`)
    mariadb: Option<(Py<PyAny>, Py<PyAny>)>,
    last_committed: Py<PyAny>,
    sequence_number: Py<PyAny>,
    transaction_length: Py<PyAny>,
    original_server_version: Py<PyAny>,
    immediate_server_version: Py<PyAny>,
    original_commit_us: Option<u64>,
    immediate_commit_us: Option<u64>,
    /// the GTID's immediate commit timestamp as it is (`_Trx.commit_us`)
    commit_us: Py<PyAny>,
    began_with_begin: bool,
}

impl OwnTrx {
    /// `silver.transactions.mariadb_domain_id` and `mariadb_seq_no` (None but for MariaDB's).
    fn mariadb_ids<'py>(&self, py: Python<'py>) -> (Bound<'py, PyAny>, Bound<'py, PyAny>) {
        match &self.mariadb {
            Some((d, s)) => (d.bind(py).clone(), s.bind(py).clone()),
            None => (py.None().into_bound(py), py.None().into_bound(py)),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum GtidKind {
    Gtid,
    Anonymous,
    Mariadb,
}

impl GtidKind {
    /// `silver.transactions.gtid_kind`
    fn name(self) -> &'static str {
        match self {
            GtidKind::Gtid => "GTID",
            GtidKind::Anonymous => "ANONYMOUS",
            GtidKind::Mariadb => "MARIADB",
        }
    }
}

/// GTIDs of one source (a MySQL UUID, a MariaDB domain) numbered `first` to `last` one after
/// another: the transactions the sink ended, as `GtidIntervalsBuilder.add_run` takes them. One
/// run, not a tuple a transaction: one by one they were a Python call each (64,565 in a 64 MiB
/// range of the bench file).
struct GtidRun {
    sid: Py<PyAny>,
    first: Py<PyAny>,
    last: Py<PyAny>,
    /// the number that extends the run (None: none does, e.g. a number past u64)
    next: Option<u64>,
}

impl GtidRun {
    /// `(sid, number)` added: to the last run when it extends it, else as a new run.
    fn add(runs: &mut Vec<GtidRun>, py: Python<'_>, sid: &Bound<'_, PyAny>, number: &Bound<'_, PyAny>) -> PyResult<()> {
        let n = number.extract::<u64>().ok();
        let next = n.and_then(|n| n.checked_add(1));
        if let Some(run) = runs.last_mut() {
            if n.is_some() && run.next == n && run.sid.bind(py).eq(sid)? {
                run.last = number.clone().unbind();
                run.next = next;
                return Ok(());
            }
        }
        runs.push(GtidRun { sid: sid.clone().unbind(), first: number.clone().unbind(), last: number.clone().unbind(), next });
        Ok(())
    }
}

/// An open transaction's counts since it opened (the sink's own) or since the last `take`.
#[derive(Default)]
struct TrxCounts {
    events: usize,
    /// the annotations' statements, in order
    statements: Vec<Py<PyAny>>,
    substantive: bool,
    has_dml: bool,
    rows: usize,
    tables: Vec<Py<PyAny>>,
    /// `(event_us, rows)` per rows event, in order: their commit time comes with the end
    pending: Vec<(Option<u64>, usize)>,
}

#[pyclass(module = "binlog_parser._native_ext")]
pub struct EventSink {
    events: Py<RowColumns>,
    row_changes: Py<RowColumns>,
    /// `silver.row_changes.commit_time`, appended when the transaction ends
    commit_times: Py<RowColumns>,
    transactions: Py<RowColumns>,
    images: Py<ImageColumns>,
    /// type code -> the extension's layout of the event class's fields (the GTIDs, QUERY,
    /// XID, the annotations)
    fields: rustc_hash::FxHashMap<u8, Py<FieldsLayout>>,
    /// `event.name` by type code; `silver.row_changes.operation` by rows type code
    names: Vec<Option<Py<PyString>>>,
    operations: Vec<Option<Py<PyString>>>,
    batch_rows: usize,
    max_pending: usize,
    table_maps: HashMap<u64, TableMapRow, ahash::RandomState>,
    /// the last TABLE_MAP the framing loop handed out, and its event (for `remember_table_map`)
    handed_out_table_map: Option<(RawTableMap, Py<PyAny>)>,
    rows_heads: HashMap<(u64, u8, u64), RowsHead, ahash::RandomState>,
    /// BEGIN events the sink took as events, by their bytes and what decoding them depends on
    /// (the QUERY post-header length, the binlog version): their fields JSON and `db` column
    begins: HashMap<QueryKey, (String, Option<Py<PyAny>>), ahash::RandomState>,
    /// the open transaction's `gtid` and `trx_pos` columns (None: no transaction is open)
    trx: Option<(Py<PyAny>, Py<PyAny>)>,
    /// the open transaction when the sink opened it
    own: Option<Box<OwnTrx>>,
    counts: TrxCounts,
    /// transactions the sink ended since the last `take`, their GTIDs, the first and last GTID
    /// text, whether one was MariaDB's
    ended: usize,
    gtids: Vec<GtidRun>,
    mariadb: bool,
    first_gtid: Option<Py<PyAny>>,
    last_gtid: Option<Py<PyAny>>,
    /// rows of the open transaction waiting for its commit time in the Python loop
    #[pyo3(get, set)]
    pending_base: usize,
    /// events taken since the last `take`
    #[pyo3(get)]
    seen: usize,
    /// events taken from their bytes (`take_bytes`), in all
    #[pyo3(get)]
    from_bytes: usize,
    next_pos: u64,
    first_us: Option<u64>,
    last_us: Option<u64>,
}

#[pymethods]
impl EventSink {
    /// `tables`: the `RowColumns` of `bronze.events`, `silver.row_changes`, its commit times and
    /// `silver.transactions`; `fields`: type code -> `FieldsLayout` of the GTIDs, QUERY, XID
    /// and annotations (`binlog_parser.render.fields_layout`); `names`: `event.name` by type
    /// code; `operations`: `silver.row_changes.operation` by rows type code.
    /// Buffers whose columns are not `SINK_LAYOUT`'s are refused (ValueError).
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, tables: (Py<RowColumns>, Py<RowColumns>, Py<RowColumns>, Py<RowColumns>), images: Py<ImageColumns>,
           fields: rustc_hash::FxHashMap<u8, Py<FieldsLayout>>, names: Py<PyDict>, operations: Py<PyDict>, batch_rows: usize,
           max_pending: usize) -> PyResult<Self> {
        let (events, row_changes, commit_times, transactions) = tables;
        for (buffer, layout) in [&events, &row_changes, &commit_times, &transactions].into_iter().zip(SINK_LAYOUT) {
            if let Some(why) = layout_mismatch(py, buffer, layout) {
                return Err(pyo3::exceptions::PyValueError::new_err(why));
            }
        }
        let by_code = |d: Py<PyDict>| -> Vec<Option<Py<PyString>>> {
            (0..=255u8).map(|tc| d.bind(py).get_item(tc).ok().flatten().and_then(|v| v.cast_into::<PyString>().ok())
                .map(Bound::unbind)).collect()
        };
        let (names, operations) = (by_code(names), by_code(operations));
        Ok(EventSink {
            events, row_changes, commit_times, transactions, images, fields, names, operations, batch_rows, max_pending,
            table_maps: HashMap::default(),
            handed_out_table_map: None,
            rows_heads: HashMap::default(),
            begins: HashMap::default(),
            trx: None,
            own: None,
            counts: TrxCounts::default(),
            ended: 0,
            gtids: Vec::new(),
            mariadb: false,
            first_gtid: None,
            last_gtid: None,
            pending_base: 0,
            seen: 0,
            from_bytes: 0,
            next_pos: 0,
            first_us: None,
            last_us: None,
        })
    }

    /// The Python loop opened a transaction: its `gtid` and `trx_pos` columns.
    fn open(&mut self, gtid: Py<PyAny>, trx_pos: Py<PyAny>) {
        self.trx = Some((gtid, trx_pos));
        self.own = None;
        self.counts = TrxCounts::default();
        self.pending_base = 0;
    }

    /// The Python loop ended the open transaction (its events were taken before).
    fn close(&mut self) {
        self.trx = None;
        self.own = None;
        self.counts = TrxCounts::default();
        self.pending_base = 0;
    }

    /// A TABLE_MAP's `bronze.events` values, for its repeats (the same `columns` object, or
    /// when `event` is the TABLE_MAP the framing loop handed out last, the same bytes).
    #[pyo3(signature = (table_id, columns, fields_json, db, table, event=None))]
    fn remember_table_map(&mut self, table_id: u64, columns: Py<PyAny>, fields_json: Py<PyString>, db: Py<PyAny>,
                          table: Py<PyAny>, event: Option<Bound<'_, PyAny>>) {
        if self.table_maps.len() >= 4096 {
            self.table_maps.clear();
        }
        let raw = match (self.handed_out_table_map.take(), event) {
            (Some((raw, handed_out)), Some(event)) if handed_out.is(&event) && raw.table_id == table_id => Some(raw),
            _ => None,
        };
        self.table_maps.insert(table_id, TableMapRow { columns, fields_json, db, table, raw });
    }

    /// What the rows events of a table (`table_id`, type code, flags, extra data, while its
    /// TABLE_MAP's `columns` are the same) share; `names`: `(db, table, db or "", table or "",
    /// "db.table" or None)`; `event`: the rows event it was worked out from (its images' column
    /// bitmaps and readers, for `take_bytes`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (table_id, type_code, flags, extra_data, columns, head_json, names, before, after, event=None))]
    fn remember_rows(&mut self, py: Python<'_>, table_id: u64, type_code: u8, flags: u64, extra_data: Py<PyAny>,
                     columns: Py<PyAny>, head_json: String, names: RowsWhere, before: Option<Py<ImageLayout>>,
                     after: Option<Py<ImageLayout>>, event: Option<Bound<'_, PyAny>>) {
        if self.rows_heads.len() >= 4096 {
            self.rows_heads.clear();
        }
        let raw = event.and_then(|e| raw_rows_head(py, &e).ok().flatten());
        let (db, table, db_text, table_text, table_key) = names;
        self.rows_heads.insert((table_id, type_code, flags), RowsHead {
            columns, extra_data, head_json, db, table, db_text, table_text, table_key, before, after, raw,
        });
    }

    /// What the events taken since the last call add to the range and to its open transaction:
    /// `(range, opened, counts)`. `range`: `(events, next_pos, first_us, last_us, transactions
    /// ended, their GTIDs as runs (arguments of `GtidIntervalsBuilder.add_run`), first GTID, last GTID, saw a
    /// MariaDB GTID)`. `opened`: None, or the transaction the sink opened and has not ended, which
    /// is the Python loop's from now on: `records._Trx`'s values (see `OwnTrx`). `counts`: the
    /// open transaction's `(events, substantive, has_dml, row_changes, tables, pending,
    /// statements)`, `pending` being `(event_us, rows)` per rows event, in order. Counts restart
    /// from zero.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let range = (self.seen, self.next_pos, self.first_us, self.last_us, self.ended,
                     PyList::new(py, self.gtids.drain(..).map(|r| (r.sid, r.first, r.last)))?,
                     self.first_gtid.take(), self.last_gtid.take(),
                     std::mem::take(&mut self.mariadb))
            .into_pyobject(py)?;
        let opened = match self.own.take() {
            None => py.None().into_bound(py),
            Some(t) => {
                let opt = |v: Option<u64>| opt_uint(py, v);
                let (domain_id, seq_no) = t.mariadb_ids(py);
                PyTuple::new(py, [
                    uint(py, t.start_pos), opt(t.begin_us), uint(py, t.server_id), t.gtid.into_bound(py),
                    PyString::new(py, t.kind.name()).into_any(), t.uuid.into_bound(py), t.gno.into_bound(py),
                    domain_id, seq_no, t.last_committed.into_bound(py), t.sequence_number.into_bound(py),
                    t.transaction_length.into_bound(py), t.original_server_version.into_bound(py),
                    t.immediate_server_version.into_bound(py), opt(t.original_commit_us), opt(t.immediate_commit_us),
                    t.commit_us.into_bound(py), pyo3::types::PyBool::new(py, t.began_with_begin).to_owned().into_any(),
                ])?.into_any()
            }
        };
        let c = std::mem::take(&mut self.counts);
        self.pending_base += c.rows;
        let counts = (c.events, c.substantive, c.has_dml, c.rows, PyList::new(py, c.tables)?, PyList::new(py, c.pending)?,
                      PyList::new(py, c.statements)?);
        self.seen = 0;
        self.ended = 0;
        self.first_us = None;
        self.last_us = None;
        PyTuple::new(py, [range.into_any(), opened, counts.into_pyobject(py)?.into_any()])
    }
}

/// The buffers' lengths before an event (`EventSink::take_event` cuts them back to these when
/// it declines the event).
struct Marks {
    events: usize,
    row_changes: usize,
    commit_times: usize,
    transactions: usize,
    images: usize,
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
    /// Whether the sink may take events of this type code (the framing loop builds the others'
    /// events and hands them out without asking).
    pub(crate) fn may_take(type_code: u8) -> bool {
        matches!(type_code, QUERY | XID | TABLE_MAP | 23..=25 | ROWS_QUERY | 30..=32 | GTID | ANONYMOUS_GTID
                 | MARIA_ANNOTATE_ROWS | MARIA_GTID)
    }

    /// Append the rows of `event` (a top-level event, just decoded) when the sink can take it;
    /// false: the Python loop handles it. On false nothing was appended.
    ///
    /// All or nothing: on an error or a panic the buffers are cut back to where they were and
    /// the event is declined. Each handler changes the sink's own state only after its last
    /// append.
    pub(crate) fn take_event(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place, body: &[u8],
                             ctx: &Bound<'_, PyAny>) -> bool {
        self.guarded(py, |sink, marks| sink.dispatch(py, event, at, marks, body, ctx))
    }

    /// `take_event` for an event of the sink's types from its bytes as framed (`body`) and
    /// the decoder context, so that an event the sink takes is never built. Only where what the
    /// bytes decode to is known to be what `take_event` takes: a GTID, an XID (decoded here as
    /// the standard decoders do); a BEGIN, TABLE_MAP or rows event whose bytes (a rows event's
    /// head, column bitmaps and TABLE_MAP) are those of one the sink was shown. False: the
    /// framing loop builds the event and offers it to `take_event`.
    pub(crate) fn take_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place, ctx: &Bound<'_, PyAny>) -> bool {
        let open = self.trx.is_some();
        let taken = match at.type_code {
            GTID | ANONYMOUS_GTID if !open => self.guarded(py, |sink, _| sink.gtid_bytes(py, body, at)),
            XID if self.own.is_some() => self.guarded(py, |sink, _| sink.xid_bytes(py, body, at, ctx)),
            QUERY if self.own.is_some() => self.guarded(py, |sink, _| sink.begin_bytes(py, body, at, ctx)),
            TABLE_MAP if open => self.guarded(py, |sink, _| sink.table_map_bytes(py, body, at, ctx)),
            23..=25 | 30..=32 if open => self.guarded(py, |sink, marks| sink.rows_bytes(py, body, at, ctx, marks.row_changes)),
            _ => false,
        };
        self.from_bytes += taken as usize;
        taken
    }

    /// The framing loop handed out this TABLE_MAP `event` (the sink did not take it): its
    /// bytes, for a `remember_table_map` of that very event.
    pub(crate) fn handed_out_table_map(&mut self, py: Python<'_>, body: &[u8], ctx: &Bound<'_, PyAny>,
                                       event: &Bound<'_, PyAny>) {
        self.handed_out_table_map = raw_table_map(py, body, ctx).ok().flatten().map(|raw| (raw, event.clone().unbind()));
    }

    /// `take` for one event: all or nothing (see `take_event`).
    fn guarded(&mut self, py: Python<'_>, take: impl FnOnce(&mut Self, &Marks) -> PyResult<bool>) -> bool {
        let Ok(marks) = self.marks(py) else { return false };
        // the Python loop cuts batches after an event that leaves either buffer this full
        if marks.events + 1 >= self.batch_rows || marks.row_changes >= self.batch_rows {
            return false;
        }
        match catch_unwind(AssertUnwindSafe(|| take(self, &marks))) {
            Ok(Ok(true)) => true,
            _ => {
                // declined, or an error (the Python loop handles the event, and meets any
                // error itself), or a panic (a bug here, never expected)
                self.undo(py, &marks);
                false
            }
        }
    }

    /// The buffers' lengths.
    fn marks(&self, py: Python<'_>) -> PyResult<Marks> {
        let len = |c: &Py<RowColumns>| -> PyResult<usize> { Ok(c.bind(py).try_borrow()?.__len__()) };
        Ok(Marks {
            events: len(&self.events)?,
            row_changes: len(&self.row_changes)?,
            commit_times: len(&self.commit_times)?,
            transactions: len(&self.transactions)?,
            images: self.images.bind(py).try_borrow()?.__len__(),
        })
    }

    /// The buffers cut back to `marks` (what a declined event appended).
    fn undo(&self, py: Python<'_>, marks: &Marks) {
        let cut = |c: &Py<RowColumns>, rows: usize| {
            if let Ok(mut c) = c.bind(py).try_borrow_mut() {
                c.truncate_rows(rows);
            }
        };
        cut(&self.events, marks.events);
        cut(&self.row_changes, marks.row_changes);
        cut(&self.commit_times, marks.commit_times);
        cut(&self.transactions, marks.transactions);
        if let Ok(mut images) = self.images.bind(py).try_borrow_mut() {
            images.truncate_to(marks.images);
        }
    }

    fn dispatch(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place, marks: &Marks, body: &[u8],
                ctx: &Bound<'_, PyAny>) -> PyResult<bool> {
        match at.type_code {
            GTID | ANONYMOUS_GTID if self.trx.is_none() => self.gtid(py, event, at),
            MARIA_GTID if self.trx.is_none() => self.maria_gtid(py, event, at),
            _ if self.trx.is_none() => Ok(false),
            TABLE_MAP => self.table_map(py, event, at),
            ROWS_QUERY | MARIA_ANNOTATE_ROWS => self.annotation(py, event, at),
            23..=25 | 30..=32 => self.rows_event(py, event, at, marks.row_changes),
            QUERY if self.after_own_gtid() => self.begin(py, event, at, body, ctx),
            XID if self.own.is_some() => self.xid(py, event, at),
            _ => Ok(false),
        }
    }

    /// A GTID with no transaction open: the sink opens one (`RangeDecoder._open_trx`).
    fn gtid(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let attr = |name: &Bound<'_, PyString>| event.getattr(name).map(Bound::unbind);
        let tag = event.getattr(pyo3::intern!(py, "tag"))?;
        if !tag.is_none() && tag.is_truthy()? {
            return Ok(false); // a tagged GTID: the Python loop's
        }
        let Some(fields) = self.fields_json(py, event, at.type_code) else { return Ok(false) };
        let imm = event.getattr(pyo3::intern!(py, "immediate_commit_timestamp"))?;
        let orig = event.getattr(pyo3::intern!(py, "original_commit_timestamp"))?;
        let anonymous = at.type_code == ANONYMOUS_GTID;
        let none = || py.None();
        let trx = OwnTrx {
            start_pos: at.pos,
            begin_us: event_us(at),
            server_id: at.fields[1],
            gtid: if anonymous { none() } else { attr(pyo3::intern!(py, "gtid"))? },
            kind: if anonymous { GtidKind::Anonymous } else { GtidKind::Gtid },
            uuid: if anonymous { none() } else { attr(pyo3::intern!(py, "uuid"))? },
            gno: if anonymous { none() } else { attr(pyo3::intern!(py, "gno"))? },
            mariadb: None,
            last_committed: attr(pyo3::intern!(py, "last_committed"))?,
            sequence_number: attr(pyo3::intern!(py, "sequence_number"))?,
            transaction_length: attr(pyo3::intern!(py, "transaction_length"))?,
            original_server_version: attr(pyo3::intern!(py, "original_server_version"))?,
            immediate_server_version: attr(pyo3::intern!(py, "immediate_server_version"))?,
            immediate_commit_us: valid_us(&imm)?,
            original_commit_us: valid_us(if orig.is_none() { &imm } else { &orig })?,
            commit_us: imm.unbind(),
            began_with_begin: false,
        };
        self.open_own(py, at, fields, trx)
    }

    /// `gtid` from the event's bytes, decoded as `events::decode_gtid` decodes them.
    fn gtid_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place) -> PyResult<bool> {
        let anonymous = at.type_code == ANONYMOUS_GTID;
        let Some(p) = gtid_parts(body, anonymous) else { return Ok(false) };
        let Some(fields) = self.gtid_fields_json(py, at.type_code, &p) else { return Ok(false) };
        let [lc, seq, imm, orig, trx_len, imm_ver, orig_ver, _] = p.tail;
        let none = || py.None();
        let int = |v: Option<u64>| opt_uint(py, v).unbind();
        let trx = OwnTrx {
            start_pos: at.pos,
            begin_us: event_us(at),
            server_id: at.fields[1],
            gtid: p.gtid.as_deref().map_or_else(none, |g| PyString::new(py, g).into_any().unbind()),
            kind: if anonymous { GtidKind::Anonymous } else { GtidKind::Gtid },
            uuid: if anonymous { none() } else { PyString::new(py, &p.uuid).into_any().unbind() },
            gno: if anonymous { none() } else { uint(py, p.gno).unbind() },
            mariadb: None,
            last_committed: int(lc),
            sequence_number: int(seq),
            transaction_length: int(trx_len),
            original_server_version: int(orig_ver),
            immediate_server_version: int(imm_ver),
            immediate_commit_us: valid_us_of(imm),
            original_commit_us: valid_us_of(orig.or(imm)),
            commit_us: int(imm),
            began_with_begin: false,
        };
        self.open_own(py, at, fields, trx)
    }

    /// A GTID event's fields JSON (`compact_json(event.fields())`) from its decoded values, with
    /// the keys of the extension's layout of `GtidEvent` (None: no layout, or not of its
    /// fields: `decode_gtid`'s values in their order).
    fn gtid_fields_json(&self, py: Python<'_>, type_code: u8, p: &GtidParts) -> Option<String> {
        let layout = self.fields.get(&type_code)?.bind(py).get();
        let keys = layout.keys_json();
        if keys.len() != 13 {
            return None;
        }
        /// A value of the JSON: hex digits, dashes and a colon need no escape
        enum Json<'a> {
            Text(&'a str),
            Int(u64),
            Null,
        }
        let int = |v: Option<u64>| v.map_or(Json::Null, Json::Int);
        let [lc, seq, imm, orig, trx_len, imm_ver, orig_ver, ticket] = p.tail;
        // `decode_gtid`'s values, in its order
        let values = [
            p.gtid.as_deref().map_or(Json::Null, Json::Text), Json::Int(p.flags as u64), Json::Text(&p.uuid), Json::Null,
            Json::Int(p.gno), int(lc), int(seq), int(imm), int(orig), int(trx_len), int(imm_ver), int(orig_ver),
            int(ticket),
        ];
        let mut out = String::with_capacity(400);
        let mut digits = itoa::Buffer::new();
        for (i, (key, value)) in keys.iter().zip(&values).enumerate() {
            out.push(if i == 0 { '{' } else { ',' });
            append_str(&mut out, key);
            match value {
                Json::Text(t) => {
                    out.push('"');
                    append_str(&mut out, t);
                    out.push('"');
                }
                Json::Int(v) => append_str(&mut out, digits.format(*v)),
                Json::Null => out.push_str("null"),
            }
        }
        out.push('}');
        Some(out)
    }

    /// A MariaDB GTID with no transaction open: the sink opens one (`RangeDecoder._open_trx`).
    fn maria_gtid(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let attr = |name: &Bound<'_, PyString>| event.getattr(name).map(Bound::unbind);
        let Some(fields) = self.fields_json(py, event, at.type_code) else { return Ok(false) };
        let none = || py.None();
        let trx = OwnTrx {
            start_pos: at.pos,
            begin_us: event_us(at),
            server_id: at.fields[1],
            gtid: attr(pyo3::intern!(py, "gtid"))?,
            kind: GtidKind::Mariadb,
            uuid: none(),
            gno: none(),
            mariadb: Some((attr(pyo3::intern!(py, "domain_id"))?, attr(pyo3::intern!(py, "seq_no"))?)),
            last_committed: none(),
            sequence_number: attr(pyo3::intern!(py, "commit_id"))?,
            transaction_length: none(),
            original_server_version: none(),
            immediate_server_version: none(),
            immediate_commit_us: None,
            original_commit_us: None,
            commit_us: none(),
            // a transaction of several statements (not FL_STANDALONE) has no BEGIN event
            began_with_begin: !event.getattr(pyo3::intern!(py, "standalone"))?.is_truthy()?,
        };
        if !self.open_own(py, at, fields, trx)? {
            return Ok(false);
        }
        self.mariadb = true;
        Ok(true)
    }

    /// The GTID event's `bronze.events` row, and the transaction it opens the sink's own.
    fn open_own(&mut self, py: Python<'_>, at: &Place, fields: String, trx: OwnTrx) -> PyResult<bool> {
        let gtid_col = match trx.kind {
            GtidKind::Anonymous => PyString::new(py, "ANONYMOUS").into_any().unbind(),
            _ => trx.gtid.clone_ref(py),
        };
        let trx_cols = (gtid_col, uint(py, at.pos).unbind());
        if !self.append_event_of(py, at, &trx_cols, Cell::Null, Cell::Null, Cell::Str(&fields))? {
            return Ok(false);
        }
        if !trx.gtid.is_none(py) {
            if self.first_gtid.is_none() {
                self.first_gtid = Some(trx.gtid.clone_ref(py));
            }
            self.last_gtid = Some(trx.gtid.clone_ref(py));
        }
        self.trx = Some(trx_cols);
        self.own = Some(Box::new(trx));
        self.counts = TrxCounts { events: 1, ..TrxCounts::default() };
        self.pending_base = 0;
        self.taken(at, event_us(at));
        Ok(true)
    }

    /// A statement's annotation (ROWS_QUERY, ANNOTATE_ROWS) in an open transaction: its text
    /// is one of the transaction's statements (`RangeDecoder._in_transaction`).
    fn annotation(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let Some(fields) = self.fields_json(py, event, at.type_code) else { return Ok(false) };
        let query = event.getattr(pyo3::intern!(py, "query"))?;
        if !self.append_event(py, at, Cell::Null, Cell::Null, Cell::Str(&fields))? {
            return Ok(false);
        }
        let c = &mut self.counts;
        c.events += 1;
        c.substantive = true;
        if query.is_truthy()? {
            c.statements.push(query.unbind());
        }
        self.taken(at, event_us(at));
        Ok(true)
    }

    /// Whether the open transaction is the sink's and nothing but its GTID is in it yet (where
    /// a BEGIN is the sink's to take).
    fn after_own_gtid(&self) -> bool {
        self.own.as_ref().is_some_and(|t| !t.began_with_begin && !self.counts.substantive)
    }

    /// The BEGIN right after the GTID of a transaction the sink opened; its bytes (`body`) are
    /// remembered for `begin_bytes`.
    fn begin(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place, body: &[u8], ctx: &Bound<'_, PyAny>)
             -> PyResult<bool> {
        let query = event.getattr(pyo3::intern!(py, "query"))?;
        if !query.cast::<PyString>().is_ok_and(|q| q.to_str().is_ok_and(|q| q == "BEGIN")) {
            return Ok(false);
        }
        let Some(fields) = self.fields_json(py, event, at.type_code) else { return Ok(false) };
        let schema = event.getattr(pyo3::intern!(py, "schema"))?;
        let db = if schema.is_truthy()? { Some(schema.unbind()) } else { None };
        if !self.begin_with(py, at, &fields, db.as_ref())? {
            return Ok(false);
        }
        if self.begins.len() >= 1024 {
            self.begins.clear();
        }
        self.begins.insert(query_key(py, ctx, body)?, (fields, db));
        Ok(true)
    }

    /// `begin` from the event's bytes: those of a BEGIN it took, under the same decoding.
    fn begin_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place, ctx: &Bound<'_, PyAny>) -> PyResult<bool> {
        if !self.after_own_gtid() {
            return Ok(false);
        }
        let Some((fields, db)) = self.begins.get(&query_key(py, ctx, body)?) else { return Ok(false) };
        let (fields, db) = (fields.clone(), db.as_ref().map(|d| d.clone_ref(py)));
        self.begin_with(py, at, &fields, db.as_ref())
    }

    /// The BEGIN's `bronze.events` row (`fields`, `db`) in the transaction the sink opened.
    fn begin_with(&mut self, py: Python<'_>, at: &Place, fields: &str, db: Option<&Py<PyAny>>) -> PyResult<bool> {
        let db = db.map(|d| d.bind(py).clone());
        if !self.append_event(py, at, db.as_ref().map_or(Cell::Null, Cell::Py), Cell::Null, Cell::Str(fields))? {
            return Ok(false);
        }
        if let Some(t) = self.own.as_mut() {
            t.began_with_begin = true;
        }
        self.counts.events += 1;
        self.taken(at, event_us(at));
        Ok(true)
    }

    /// The XID that ends a transaction the sink opened: its `silver.transactions` row and its
    /// row changes' commit time (`RangeDecoder._close_trx`).
    fn xid(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let Ok(xid) = event.getattr(pyo3::intern!(py, "xid"))?.extract::<u64>() else { return Ok(false) };
        let Some(fields) = self.fields_json(py, event, at.type_code) else { return Ok(false) };
        self.end_own(py, at, xid, &fields)
    }

    /// `xid` from the event's bytes, decoded as `events::decode_xid` decodes them.
    fn xid_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place, ctx: &Bound<'_, PyAny>) -> PyResult<bool> {
        let phls = ctx.getattr(pyo3::intern!(py, "post_header_lengths"))?;
        let Some(xid) = xid_value(body, phls.cast::<pyo3::types::PyBytes>()?.as_bytes()) else { return Ok(false) };
        let layout = self.fields.get(&XID).map(|l| l.bind(py).get());
        let Some([key]) = layout.map(|l| l.keys_json()) else { return Ok(false) };
        let mut fields = String::with_capacity(key.len() + 22);
        fields.push('{');
        fields.push_str(key);
        fields.push_str(itoa::Buffer::new().format(xid));
        fields.push('}');
        self.end_own(py, at, xid, &fields)
    }

    /// The end of a transaction the sink opened, by the XID `xid` (`fields`: its fields JSON).
    /// An `xid` too large for its BIGINT column is the Python loop's (it stores NULL and says so).
    fn end_own(&mut self, py: Python<'_>, at: &Place, xid: u64, fields: &str) -> PyResult<bool> {
        if i64::try_from(xid).is_err() {
            return Ok(false);
        }
        let Some(t) = self.own.as_deref() else { return Ok(false) };
        let Some((gtid_col, _)) = &self.trx else { return Ok(false) };
        let c = &self.counts;
        let header_us = event_us(at);
        let mut tables = c.tables.iter().map(|t| t.extract::<String>(py)).collect::<PyResult<Vec<_>>>()?;
        tables.sort_unstable();
        tables.dedup();
        let opt = |v: Option<u64>| v.map_or(Cell::Null, Cell::UInt);
        let kind = if c.has_dml { "DML" } else { "EMPTY" };
        let (domain_id, seq_no) = t.mariadb_ids(py);
        let maria_server_id = if t.mariadb.is_some() { Cell::UInt(t.server_id) } else { Cell::Null };
        let (statements, tables) = (PyList::new(py, &c.statements)?.into_any(), PyList::new(py, tables)?.into_any());
        let (gtid, uuid, gno) = (t.gtid.bind(py), t.uuid.bind(py), t.gno.bind(py));
        let (last_committed, sequence_number) = (t.last_committed.bind(py), t.sequence_number.bind(py));
        let (original_version, immediate_version) = (t.original_server_version.bind(py), t.immediate_server_version.bind(py));
        let transaction_length = t.transaction_length.bind(py);
        let complete = pyo3::types::PyBool::new(py, true).to_owned().into_any();
        let row = [
            Cell::UInt(t.start_pos), Cell::UInt(at.next_pos), Cell::Py(gtid), Cell::Str(t.kind.name()), Cell::Py(uuid),
            Cell::Null, Cell::Py(gno), Cell::Py(&domain_id), maria_server_id, Cell::Py(&seq_no), Cell::Py(last_committed),
            Cell::Py(sequence_number), opt(t.begin_us), opt(header_us), opt(t.original_commit_us), opt(t.immediate_commit_us),
            Cell::Py(original_version), Cell::Py(immediate_version), Cell::Py(transaction_length), Cell::UInt(t.server_id),
            Cell::UInt(xid), Cell::UInt(c.events as u64 + 1), Cell::UInt(c.rows as u64), Cell::Py(&statements),
            Cell::Py(&tables), Cell::Str(kind), Cell::Str("XID"), Cell::Py(&complete),
        ];
        let commit = valid_us(t.commit_us.bind(py))?.or(header_us);
        // `_close_trx`: the GTID goes into the range's contained set
        let contained = if !gno.is_none() && gno.is_truthy()? && uuid.is_truthy()? {
            Some((uuid.clone(), gno.clone()))
        } else if !seq_no.is_none() {
            Some((domain_id.str()?.into_any(), seq_no.clone()))
        } else {
            None
        };
        if !self.transactions.bind(py).try_borrow_mut()?.append_cells(py, &row)? {
            return Ok(false); // a value too large for its column: the Python loop stores NULL and says so
        }
        let trx_cols = (gtid_col.clone_ref(py), uint(py, t.start_pos).unbind());
        if !self.append_event_of(py, at, &trx_cols, Cell::Null, Cell::Null, Cell::Str(fields))? {
            return Ok(false);
        }
        let mut times = self.commit_times.bind(py).try_borrow_mut()?;
        for (event_us, n) in &c.pending {
            if !times.append_cells_repeated(py, *n, &[opt(commit.or(*event_us))])? {
                return Ok(false);
            }
        }
        drop(times);
        if let Some((sid, number)) = contained {
            GtidRun::add(&mut self.gtids, py, &sid, &number)?;
        }
        self.ended += 1;
        self.trx = None;
        self.own = None;
        self.counts = TrxCounts::default();
        self.pending_base = 0;
        self.taken(at, header_us);
        Ok(true)
    }

    /// `compact_json(event.fields())` by the extension (None: the Python loop's).
    fn fields_json(&self, py: Python<'_>, event: &Bound<'_, PyAny>, type_code: u8) -> Option<String> {
        let layout = self.fields.get(&type_code)?;
        fields_text(py, event, layout.get())
    }

    fn table_map(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place) -> PyResult<bool> {
        let table_id: u64 = event.getattr(pyo3::intern!(py, "table_id"))?.extract()?;
        let Some(row) = self.table_maps.get(&table_id) else { return Ok(false) };
        if !event.getattr(pyo3::intern!(py, "columns"))?.is(&row.columns) {
            return Ok(false);
        }
        self.append_table_map(py, at, table_id)
    }

    /// The `bronze.events` row of a TABLE_MAP of `table_id`, as remembered, in the open
    /// transaction.
    fn append_table_map(&mut self, py: Python<'_>, at: &Place, table_id: u64) -> PyResult<bool> {
        let Some(row) = self.table_maps.get(&table_id) else { return Ok(false) };
        let (fields_json, db, table) = (row.fields_json.bind(py).clone(), row.db.bind(py).clone(), row.table.bind(py).clone());
        if !self.append_event(py, at, Cell::Py(&db), Cell::Py(&table), Cell::Py(fields_json.as_any()))? {
            return Ok(false);
        }
        self.counts.events += 1;
        self.counts.substantive = true;
        self.taken(at, event_us(at));
        Ok(true)
    }

    /// `table_map` from the event's bytes (`take_bytes`).
    fn table_map_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place, ctx: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Some(seen) = raw_table_map(py, body, ctx)? else { return Ok(false) };
        let Some(row) = self.table_maps.get(&seen.table_id) else { return Ok(false) };
        let Some(raw) = row.raw.as_ref() else { return Ok(false) };
        if raw.body != seen.body || raw.post_header_length != seen.post_header_length
            || !raw.server_version.bind(py).eq(seen.server_version.bind(py))?
            || !registered_columns_are(py, ctx, seen.table_id, &row.columns)? {
            return Ok(false);
        }
        self.append_table_map(py, at, seen.table_id)
    }

    /// A rows event in an open transaction (`row_changes`: that buffer's rows before it).
    fn rows_event(&mut self, py: Python<'_>, event: &Bound<'_, PyAny>, at: &Place, row_changes: usize) -> PyResult<bool> {
        let rows = event.getattr(pyo3::intern!(py, "rows"))?;
        let Ok(images) = rows.cast::<RowImages>() else { return Ok(false) };
        let n = images.get().len();
        let table_id: u64 = event.getattr(pyo3::intern!(py, "table_id"))?.extract()?;
        let flags: u64 = event.getattr(pyo3::intern!(py, "flags"))?.extract()?;
        let key = (table_id, at.type_code, flags);
        let Some(head) = self.rows_heads.get(&key) else { return Ok(false) };
        let table = event.getattr(pyo3::intern!(py, "table"))?;
        if table.is_none() || !table.getattr(pyo3::intern!(py, "columns"))?.is(&head.columns)
            || !event.getattr(pyo3::intern!(py, "extra_data"))?.eq(head.extra_data.bind(py))? {
            return Ok(false);
        }
        self.append_rows(py, at, key, row_changes, Some(n), |sink, before, after, _room| {
            render_changes_into(py, &rows, before, after, sink)
        })
    }

    /// `rows_event` from the event's bytes (`take_bytes`).
    fn rows_bytes(&mut self, py: Python<'_>, body: &[u8], at: &Place, ctx: &Bound<'_, PyAny>, row_changes: usize)
                  -> PyResult<bool> {
        let t = at.type_code;
        if !ctx.getattr_opt(pyo3::intern!(py, "rows_as_bytes"))?.is_some_and(|v| v.is_truthy().unwrap_or(false)) {
            return Ok(false);
        }
        // what `rows_event_inner` reads before the images
        let phl = post_header_length(py, ctx, t)?;
        let Some(h) = rows_event_head(body, phl, t as u32) else { return Ok(false) };
        let key = (h.table_id, t, h.flags);
        let Some(head) = self.rows_heads.get(&key) else { return Ok(false) };
        let Some(raw) = head.raw.as_ref() else { return Ok(false) };
        if h.extra != raw.extra_data.as_slice() || h.width != raw.width || h.present != raw.present.as_slice()
            || h.present_after != raw.present_after.as_deref()
            || !registered_columns_are(py, ctx, h.table_id, &head.columns)? {
            return Ok(false);
        }
        let pos = h.images;
        let (kind, first, second) = (raw.kind, raw.first.bind(py).clone(), raw.second.as_ref().map(|r| r.bind(py).clone()));
        let (first, second) = (first.get(), second.as_ref().map(|r| r.get()));
        if kind == 1 && second.is_none() {
            return Ok(false); // an UPDATE reads two images a change
        }
        self.append_rows(py, at, key, row_changes, None, |sink, before, after, room| {
            let mut sink = sink.try_borrow_mut().ok()?;
            let data = EventBytes::borrowed(body);
            let layouts = (before.map(|b| b.get()), after.map(|a| a.get()));
            images_from_data(py, &data, pos, Changes::ToTheEndBelow(room), sides(kind, first, second), layouts, &mut sink).ok()
        })
    }

    /// The rows of a rows event whose head is `rows_heads[key]`: its `bronze.events` row, its
    /// row changes and (by `render`, given the room left: fewer changes than that fit) their
    /// images. `n`: the number of changes when it is known before they are rendered; a rows
    /// event taken from its bytes is counted as it is rendered.
    #[allow(clippy::type_complexity)]
    fn append_rows<'py>(&mut self, py: Python<'py>, at: &Place, key: (u64, u8, u64), row_changes: usize,
                        n: Option<usize>,
                        render: impl FnOnce(&Bound<'py, ImageColumns>, Option<&Bound<'py, ImageLayout>>,
                                            Option<&Bound<'py, ImageLayout>>, usize) -> Option<usize>) -> PyResult<bool> {
        // fewer changes than this fit: past it the Python loop flushes the transaction's rows
        // after this event, or cuts the batch
        let room = self.max_pending.saturating_sub(self.pending_base + self.counts.rows)
            .min(self.batch_rows.saturating_sub(row_changes));
        if n.is_some_and(|n| n >= room) {
            return Ok(false);
        }
        let Some(head) = self.rows_heads.get(&key) else { return Ok(false) };
        let Some(operation) = self.operations[at.type_code as usize].as_ref().map(|o| o.bind(py).clone().into_any())
        else { return Ok(false) };
        let name = self.name(py, at.type_code)?;
        let Some((gtid, trx_pos)) = self.trx.as_ref() else { return Ok(false) };
        let event_us = event_us(at);
        let (before, after) = (head.before.as_ref().map(|l| l.bind(py)), head.after.as_ref().map(|l| l.bind(py)));
        // the images first (on a fallback the sink is as it was), then the event's row and its
        // row changes
        let n = match n {
            Some(0) => 0,
            _ => match render(self.images.bind(py), before, after, room) {
                Some(rendered) if n.is_none_or(|n| n == rendered) && rendered < room => rendered,
                _ => return Ok(false),
            },
        };
        let mut fields_json = String::with_capacity(head.head_json.len() + 64);
        fields_json.push_str(&head.head_json);
        fields_json.push_str(",\"row_count\":");
        fields_json.push_str(itoa::Buffer::new().format(n));
        fields_json.push_str(",\"row_images\":\"silver.row_changes\"}");
        let (db_text, table_text) = (head.db_text.bind(py), head.table_text.bind(py));
        let values = [
            Cell::UInt(at.pos), Cell::Null, Cell::UInt(0), Cell::Py(gtid.bind(py)), Cell::Py(trx_pos.bind(py)),
            event_us.map_or(Cell::Null, Cell::UInt), Cell::UInt(at.fields[1]), Cell::Py(db_text), Cell::Py(table_text),
            Cell::Py(&operation), Cell::Py(&name),
        ];
        if !self.append_event(py, at, Cell::Py(head.db.bind(py)), Cell::Py(head.table.bind(py)), Cell::Str(&fields_json))? {
            return Ok(false);
        }
        if !self.row_changes.bind(py).try_borrow_mut()?.append_cells_repeated(py, n, &values)? {
            return Ok(false); // never expected (the values are the header's)
        }
        let c = &mut self.counts;
        if let Some(key) = &head.table_key {
            c.tables.push(key.clone_ref(py));
        }
        c.pending.push((event_us, n));
        c.rows += n;
        c.events += 1;
        c.substantive = true;
        c.has_dml = true;
        self.taken(at, event_us);
        Ok(true)
    }

    /// The event's `bronze.events` row in the open transaction (false: let the Python loop do
    /// it).
    fn append_event(&self, py: Python<'_>, at: &Place, db: Cell<'_, '_>, table: Cell<'_, '_>,
                    fields_json: Cell<'_, '_>) -> PyResult<bool> {
        let Some(trx) = self.trx.as_ref() else { return Ok(false) };
        self.append_event_of(py, at, trx, db, table, fields_json)
    }

    /// The event's `bronze.events` row, in the transaction of `(gtid, trx_pos)`.
    fn append_event_of(&self, py: Python<'_>, at: &Place, (gtid, trx_pos): &(Py<PyAny>, Py<PyAny>), db: Cell<'_, '_>,
                       table: Cell<'_, '_>, fields_json: Cell<'_, '_>) -> PyResult<bool> {
        let [_, server_id, size, log_pos, flags] = at.fields;
        let checksum = match at.checksum_ok {
            None => "none",
            Some(true) => "ok",
            Some(false) => "bad",
        };
        let name = self.name(py, at.type_code)?;
        let values = [
            Cell::UInt(at.pos), Cell::Null, Cell::Null, Cell::UInt(at.next_pos), Cell::UInt(at.type_code as u64),
            Cell::Py(&name), event_us(at).map_or(Cell::Null, Cell::UInt), Cell::UInt(server_id), Cell::UInt(size),
            Cell::UInt(log_pos), Cell::UInt(flags), Cell::Str(checksum), Cell::Py(gtid.bind(py)), Cell::Py(trx_pos.bind(py)),
            db, table, fields_json, Cell::Null,
        ];
        // a misfit (a value too large for its column, never expected of a header): the Python
        // loop stores it as NULL and says so
        self.events.bind(py).try_borrow_mut()?.append_cells(py, &values)
    }

    fn name<'py>(&self, py: Python<'py>, type_code: u8) -> PyResult<Bound<'py, PyAny>> {
        match &self.names[type_code as usize] {
            Some(name) => Ok(name.bind(py).clone().into_any()),
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

/// A commit timestamp in microseconds as `records._valid_us` keeps it: None when absent (None
/// or 0) or past what a TIMESTAMP holds.
fn valid_us(v: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    Ok(if v.is_none() { None } else { valid_us_of(Some(v.extract::<u64>()?)) })
}

/// `valid_us` of a decoded value.
fn valid_us_of(v: Option<u64>) -> Option<u64> {
    v.filter(|&us| us != 0 && us <= MAX_US)
}

/// What a QUERY event's decoding depends on (`events::decode_query`): the post-header length,
/// the binlog version and its bytes (a sink serves one range of one file: one server).
type QueryKey = (u8, u32, Vec<u8>);

/// `QueryKey` of a QUERY event's bytes under the context.
fn query_key(py: Python<'_>, ctx: &Bound<'_, PyAny>, body: &[u8]) -> PyResult<QueryKey> {
    let version: u32 = ctx.getattr(pyo3::intern!(py, "binlog_version"))?.extract()?;
    Ok((post_header_length(py, ctx, QUERY)? as u8, version, body.to_vec()))
}

fn opt_uint(py: Python<'_>, v: Option<u64>) -> Bound<'_, PyAny> {
    match v {
        Some(v) => uint(py, v),
        None => py.None().into_bound(py),
    }
}

/// `ctx.post_header_length(t)`: `ctx.post_header_lengths[t - 1]`, else 0.
fn post_header_length(py: Python<'_>, ctx: &Bound<'_, PyAny>, t: u8) -> PyResult<usize> {
    let phls = ctx.getattr(pyo3::intern!(py, "post_header_lengths"))?;
    let phls = phls.cast::<pyo3::types::PyBytes>()?;
    Ok(phls.as_bytes().get(t as usize - 1).copied().unwrap_or(0) as usize)
}

/// Whether the context's TABLE_MAP of `table_id` (what a rows event of the table is decoded
/// with) has these decoded `columns`.
fn registered_columns_are(py: Python<'_>, ctx: &Bound<'_, PyAny>, table_id: u64, columns: &Py<PyAny>) -> PyResult<bool> {
    let maps = ctx.getattr(pyo3::intern!(py, "table_maps"))?;
    let Ok(maps) = maps.cast_exact::<PyDict>() else { return Ok(false) };
    match maps.get_item(table_id)? {
        Some(tm) => Ok(tm.getattr(pyo3::intern!(py, "columns"))?.is(columns)),
        None => Ok(false),
    }
}

/// A TABLE_MAP's bytes as framed and what decoding them depends on in the context (None: a
/// user schema, which may name the columns otherwise at another place, or a short body).
fn raw_table_map(py: Python<'_>, body: &[u8], ctx: &Bound<'_, PyAny>) -> PyResult<Option<RawTableMap>> {
    if !ctx.getattr(pyo3::intern!(py, "schemas"))?.is_none() {
        return Ok(None);
    }
    let phl = post_header_length(py, ctx, TABLE_MAP)?;
    let id_len = if phl == 6 { 4 } else { 6 };
    let Some(id) = body.get(..id_len) else { return Ok(None) };
    Ok(Some(RawTableMap {
        table_id: le(id),
        body: body.to_vec(),
        post_header_length: phl as u8,
        server_version: ctx.getattr(pyo3::intern!(py, "server_version"))?.unbind(),
    }))
}

/// What `take_bytes` compares and reads with, from a rows event the Python loop was shown
/// (None: its images are not kept as bytes).
fn raw_rows_head(py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<Option<RawRowsHead>> {
    let rows = event.getattr(pyo3::intern!(py, "rows"))?;
    let Ok(images) = rows.cast::<RowImages>() else { return Ok(None) };
    let (_, _, kind, first, second) = images.get().parts();
    let bytes = |name: &Bound<'_, PyString>| -> PyResult<Option<Vec<u8>>> {
        let v = event.getattr(name)?;
        Ok(if v.is_none() { None } else { Some(v.extract::<Vec<u8>>()?) })
    };
    let (Some(extra_data), Some(present)) = (bytes(pyo3::intern!(py, "extra_data"))?, bytes(pyo3::intern!(py, "columns_present"))?)
    else { return Ok(None) };
    Ok(Some(RawRowsHead {
        extra_data,
        width: event.getattr(pyo3::intern!(py, "column_count"))?.extract()?,
        present,
        present_after: bytes(pyo3::intern!(py, "columns_present_after"))?,
        kind,
        first: first.clone_ref(py),
        second: second.map(|s| s.clone_ref(py)),
    }))
}
