//! Compiled framing loop of `binlog_parser.framing.EventFramer` (issue 13).
//!
//! On small-event binlogs the Python reader loop (common header, size checks, CRC32,
//! `EventHeader`, dispatch) cost as much as decoding the rows. `EventTypes.frames(...)` returns
//! an iterator that does that loop here, one event per `__next__` (as lazily as the Python
//! loop: nothing is decoded before it is asked for), for as long as the events are plain:
//!
//! * the whole event is in the buffer the framer holds;
//! * its size fits (header length, the file's size, `max_event_size`, room for the CRC);
//! * its CRC32 matches, when the file is checksummed and checksums are verified;
//! * it is not a FORMAT_DESCRIPTION, a START_EVENT_V3 or a TRANSACTION_PAYLOAD to expand
//!   (framing state the Python loop keeps), nor at or past `stop_position`;
//! * its body decoder succeeds.
//!
//! At the first event that is not, the iterator stops *before* it, without side effects, and
//! the Python loop frames that event: it asks for more data, raises the exact error (file,
//! offset, words), marks a lenient checksum mismatch, or applies the FORMAT_DESCRIPTION. Then
//! it asks for a new iterator. Body decoders are the framer's `dispatch` entries, called as
//! the Python loop calls them; GTID, XID and QUERY (`events.rs`) and known rows events are
//! decoded here when `dispatch` holds the standard decoder for them.
//!
//! `scan_headers` (the ingest plans file splits with it) runs no Python per event: its
//! dispatch's `decode_header_only` is recognised (the `HeaderOnlyEvent` is built here, the
//! body never looked at), and with the framer's `headers_only` the header itself is handed out.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::buffer::PyBuffer;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple, PyType};

use crate::events::{decode_gtid, decode_query, decode_xid};
use crate::sink::{EventSink, Place};
use crate::{le, rows_event_inner, uint, SlotLayout, SlotsConstructor};

const START_V3: u8 = 1;
const QUERY: u8 = 2;
const FDE: u8 = 15;
const XID: u8 = 16;
const TABLE_MAP: u8 = 19;
const GTID: u8 = 33;
const ANONYMOUS_GTID: u8 = 34;
const PAYLOAD: u8 = 40;
const CHECKSUM_CRC32: u32 = 1;

/// The Python classes the framing loop builds and the standard decoders it recognises in a
/// framer's `dispatch` (built once by `binlog_parser/_native_framing.py`).
#[pyclass(frozen, module = "binlog_parser._native_ext")]
pub struct EventTypes {
    header: SlotLayout,
    pub(crate) gtid: SlotLayout,
    pub(crate) xid: SlotLayout,
    pub(crate) query: SlotLayout,
    rows_event: SlotsConstructor,
    table_map: SlotLayout,
    header_only: SlotLayout,
    unknown: Py<PyAny>,
    dec_gtid: Py<PyAny>,
    dec_xid: Py<PyAny>,
    dec_query: Py<PyAny>,
    dec_rows: Py<PyAny>,
    dec_table_map: Py<PyAny>,
    dec_header_only: Py<PyAny>,
}

#[pymethods]
impl EventTypes {
    /// `classes`: `EventHeader`, `GtidEvent`, `XidEvent`, `QueryEvent`, `RowsEvent`,
    /// `TableMapEvent` and `HeaderOnlyEvent`; `decoders`: the standard `decode_gtid`,
    /// `decode_xid`, `decode_query`, `decode_rows_event`, `decode_table_map` and
    /// `decode_header_only` (`scan_headers`' dispatch); `unknown`: `UnknownEvent.from_body`.
    #[new]
    fn new(
        py: Python<'_>,
        classes: (Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>),
        decoders: (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>),
        unknown: Py<PyAny>,
    ) -> PyResult<Self> {
        let (header, gtid, xid, query, rows_event, table_map, header_only) = classes;
        let n_fields = |cls: &Bound<'_, PyType>| -> PyResult<usize> {
            py.import("dataclasses")?.call_method1("fields", (cls,))?.len()
        };
        let n_rows = n_fields(&rows_event)?;
        Ok(EventTypes {
            header: SlotLayout::new(py, &header, 11)?,
            gtid: SlotLayout::new(py, &gtid, 14)?,
            xid: SlotLayout::new(py, &xid, 2)?,
            query: SlotLayout::new(py, &query, 9)?,
            rows_event: SlotsConstructor { layout: SlotLayout::new(py, &rows_event, n_rows)? },
            table_map: SlotLayout::new(py, &table_map, n_fields(&table_map)?)?,
            header_only: SlotLayout::new(py, &header_only, 1)?,
            unknown,
            dec_gtid: decoders.0,
            dec_xid: decoders.1,
            dec_query: decoders.2,
            dec_rows: decoders.3,
            dec_table_map: decoders.4,
            dec_header_only: decoders.5,
        })
    }

    /// The events of `framer`'s buffer (`mv`, holding file bytes from `base`) from `pos` on,
    /// framed with `ctx`'s layout; see the module docs for where it stops.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (framer, mv, base, pos, ctx, dispatch, stop, total, verify, max_event_size, expand, payload_pos, headers, header_types, header_from))]
    fn frames(
        slf: Py<Self>,
        py: Python<'_>,
        framer: Py<PyAny>,
        mv: Bound<'_, PyAny>,
        base: Bound<'_, PyAny>,
        pos: Bound<'_, PyAny>,
        ctx: Bound<'_, PyAny>,
        dispatch: Bound<'_, PyAny>,
        stop: Bound<'_, PyAny>,
        total: Bound<'_, PyAny>,
        verify: Bound<'_, PyAny>,
        max_event_size: Bound<'_, PyAny>,
        expand: Bound<'_, PyAny>,
        payload_pos: Py<PyAny>,
        headers: Bound<'_, PyAny>,
        header_types: Bound<'_, PyAny>,
        header_from: Bound<'_, PyAny>,
    ) -> Option<Frames> {
        // anything unexpected (a buffer it cannot read in place, a value that is not a
        // non-negative int, a dispatch table that is not a plain dict): None, and the Python
        // loop frames every event as it always did
        let int = |v: &Bound<'_, PyAny>| v.extract::<u64>().ok();
        let attr = |name: &Bound<'_, pyo3::types::PyString>| int(&ctx.getattr(name).ok()?);
        let header_length = usize::try_from(attr(pyo3::intern!(py, "header_length"))?).ok()?;
        let version = attr(pyo3::intern!(py, "binlog_version"))?;
        let alg = attr(pyo3::intern!(py, "checksum_alg"))?;
        let limit = |v: &Bound<'_, PyAny>| if v.is_none() { Some(u64::MAX) } else { int(v) };
        let (stop, total, max_event_size) = (limit(&stop)?, limit(&total)?, int(&max_event_size)?);
        let (base, pos, header_from) = (int(&base)?, int(&pos)?, int(&header_from)?);
        let (verify, expand, headers) = (verify.is_truthy().ok()?, expand.is_truthy().ok()?, headers.is_truthy().ok()?);
        let dispatch = dispatch.cast_into_exact::<PyDict>().ok()?;
        // `EventFramer._header_type_table`: one byte per type code, or None (every type)
        let header_types = if header_types.is_none() {
            None
        } else {
            let table = header_types.cast::<pyo3::types::PyBytes>().ok()?.as_bytes();
            Some(Box::new(<[u8; 256]>::try_from(table).ok()?.map(|b| b != 0)))
        };
        let data = PyBuffer::get(&mv).ok()?;
        if !data.is_c_contiguous() {
            return None;
        }
        // the caller's sink (`DecodeContext.event_sink`): top-level events only, and events
        // handed out, not headers
        let sink = match ctx.getattr_opt(pyo3::intern!(py, "event_sink")).ok()? {
            Some(s) if !headers && payload_pos.is_none(py) && !s.is_none() => Some(s.cast_into::<EventSink>().ok()?.unbind()),
            _ => None,
        };
        Some(Frames {
            types: slf,
            framer,
            data,
            mv: mv.unbind(),
            base,
            pos,
            stop,
            total,
            header_length,
            v1: version == 1,
            crc: alg == CHECKSUM_CRC32 as u64,
            verify,
            max_event_size,
            expand,
            payload_pos,
            headers,
            header_types: header_types.filter(|_| headers),
            header_from,
            dispatch: dispatch.unbind(),
            ctx: ctx.unbind(),
            sink,
        })
    }
}

/// One run of the compiled framing loop over the bytes a framer holds (`EventTypes.frames`).
/// `pos`: the offset of the next event, where the Python loop goes on once it stops.
#[pyclass(module = "binlog_parser._native_ext")]
pub struct Frames {
    types: Py<EventTypes>,
    framer: Py<PyAny>,
    data: PyBuffer<u8>,
    mv: Py<PyAny>,
    base: u64,
    #[pyo3(get)]
    pos: u64,
    stop: u64,
    total: u64,
    header_length: usize,
    v1: bool,
    crc: bool,
    verify: bool,
    max_event_size: u64,
    expand: bool,
    payload_pos: Py<PyAny>,
    /// `EventFramer.headers_only`: hand out each event's header in place of the event
    headers: bool,
    /// with `headers`, the types whose headers are handed out (None: all); the others are
    /// passed over without a header built
    header_types: Option<Box<[bool; 256]>>,
    /// with `header_types`, events before this position are passed over too
    /// (`EventFramer.header_from`)
    header_from: u64,
    dispatch: Py<PyDict>,
    ctx: Py<PyAny>,
    /// takes the events of plain transactions it can instead of their being handed out
    sink: Option<Py<EventSink>>,
}

/// The common header of one event that frames cleanly.
struct Framed {
    type_code: u8,
    size: u64,
    body: std::ops::Range<usize>,
    checksum_ok: Option<bool>,
    fields: [u64; 5], // timestamp, server_id, event_size, log_pos, flags
}

#[pymethods]
impl Frames {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(mut slf: PyRefMut<'py, Self>, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        let this = &mut *slf;
        // an error, or a panic (a bug here, never expected): stop, and let the Python loop
        // frame this event (it decodes it or raises the exact error)
        match catch_unwind(AssertUnwindSafe(|| this.next_event(py))) {
            Ok(Ok(Some(event))) => Some(event),
            _ => None,
        }
    }
}

impl Frames {
    fn bytes(&self) -> &[u8] {
        let (ptr, len) = (self.data.buf_ptr() as *const u8, self.data.len_bytes());
        if len == 0 || ptr.is_null() {
            return &[];
        }
        // SAFETY: the buffer export is held by `self.data` (the exporter cannot resize or
        // free it meanwhile) and the framer never writes into the bytes it was handed
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    /// `EventFramer._header` + `_checksum` for the event at `self.pos`, or None when the
    /// Python loop must frame it.
    fn frame(&self) -> Option<Framed> {
        let pos = self.pos;
        if pos >= self.stop || pos < self.base {
            return None;
        }
        let buf = self.bytes();
        let off = usize::try_from(pos - self.base).ok()?;
        let head = buf.get(off..off.checked_add(if self.v1 { 13 } else { 19 })?)?;
        let type_code = head[4];
        if type_code == FDE || type_code == START_V3 || (type_code == PAYLOAD && self.expand) {
            return None;
        }
        let size = le(&head[9..13]);
        let (log_pos, flags) = if self.v1 { (0, 0) } else { (le(&head[13..17]), le(&head[17..19])) };
        let hl = self.header_length as u64;
        if size < hl || pos.checked_add(size)? > self.total || size > self.max_event_size {
            return None;
        }
        let raw = buf.get(off..off.checked_add(usize::try_from(size).ok()?)?)?;
        let (end, checksum_ok) = if self.crc {
            let end = raw.len().checked_sub(4)?;
            if (end as u64) < hl {
                return None;
            }
            if self.verify {
                if crc32fast::hash(&raw[..end]) as u64 != le(&raw[end..]) {
                    return None; // raised, or marked when lenient, by the Python loop
                }
                (end, Some(true))
            } else {
                (end, None)
            }
        } else {
            (raw.len(), None)
        };
        Some(Framed {
            type_code,
            size,
            body: off + self.header_length..off + end,
            checksum_ok,
            fields: [le(&head[0..4]), le(&head[5..9]), size, log_pos, flags],
        })
    }

    /// The next event to hand out: events the sink takes are appended there and skipped.
    fn next_event<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let Some(f) = self.frame() else { return Ok(None) };
            if self.header_types.as_ref().is_some_and(|wanted| !wanted[usize::from(f.type_code)] || self.pos < self.header_from) {
                self.pos += f.size;
                continue;
            }
            let sink = self.sink.as_ref().filter(|_| EventSink::may_take(f.type_code));
            let Some(sink) = sink.map(|s| s.bind(py).clone()) else { return self.hand_out(py, f) };
            let at = Place { pos: self.pos, next_pos: self.pos + f.size, type_code: f.type_code, fields: f.fields,
                             checksum_ok: f.checksum_ok };
            // an event the standard decoder would decode: first offered as its bytes, so one the
            // sink takes is never built
            let from_bytes = self.standard_decoder(py, f.type_code)?;
            let ctx = self.ctx.bind(py).clone();
            if from_bytes && sink.try_borrow_mut()?.take_bytes(py, &self.bytes()[f.body.clone()], &at, &ctx) {
                self.pos = at.next_pos;
                continue;
            }
            let Some(event) = self.framed_event(py, &f)? else { return Ok(None) };
            let mut s = sink.try_borrow_mut()?;
            let body = &self.bytes()[f.body.clone()];
            if !s.take_event(py, &event.1, &at, body, &ctx) {
                if from_bytes && f.type_code == TABLE_MAP {
                    s.handed_out_table_map(py, body, &ctx, &event.1);
                }
                drop(s);
                return self.handed_out(py, f, event);
            }
            self.pos = at.next_pos;
        }
    }

    /// Whether the dispatch decodes events of type `t` with the standard decoder the sink's
    /// takes from bytes stand for (`EventSink::take_bytes`): GTID, XID, QUERY, TABLE_MAP, rows.
    fn standard_decoder(&self, py: Python<'_>, t: u8) -> PyResult<bool> {
        let types = self.types.get();
        let want = match t {
            GTID | ANONYMOUS_GTID => &types.dec_gtid,
            XID => &types.dec_xid,
            QUERY => &types.dec_query,
            TABLE_MAP => &types.dec_table_map,
            23..=25 | 30..=32 => &types.dec_rows,
            _ => return Ok(false),
        };
        Ok(self.dispatch.bind(py).get_item(t)?.is_some_and(|d| d.is(want)))
    }

    fn hand_out<'py>(&mut self, py: Python<'py>, f: Framed) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(event) = self.framed_event(py, &f)? else { return Ok(None) };
        self.handed_out(py, f, event)
    }

    /// The framer's position, then the event (or with `headers` its header) handed out.
    fn handed_out<'py>(&mut self, py: Python<'py>, f: Framed, (header, event): (Bound<'py, PyAny>, Bound<'py, PyAny>))
                       -> PyResult<Option<Bound<'py, PyAny>>> {
        let pos = self.pos;
        self.framer.bind(py).setattr(pyo3::intern!(py, "position"), uint(py, pos))?;
        self.pos = pos + f.size;
        Ok(Some(if self.headers { header } else { event }))
    }

    /// The framed event's header and the event decoded (None: let the Python loop decode it).
    fn framed_event<'py>(&self, py: Python<'py>, f: &Framed) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        let types = self.types.get();
        let pos = self.pos;
        let [timestamp, server_id, size, log_pos, flags] = f.fields;
        let ok = match f.checksum_ok {
            Some(v) => pyo3::types::PyBool::new(py, v).to_owned().into_any(),
            None => py.None().into_bound(py),
        };
        let pos_obj = uint(py, pos);
        let header = types.header.make(py, [
            pos_obj.clone(), uint(py, pos + f.size), uint(py, timestamp), uint(py, f.type_code as u64),
            uint(py, server_id), uint(py, size), uint(py, log_pos), uint(py, flags), ok,
            self.payload_pos.bind(py).clone(), py.None().into_bound(py),
        ])?;
        let Some(event) = self.decode(py, types, &header, f)? else { return Ok(None) };
        Ok(Some((header, event)))
    }

    /// The event's body decoded as `dispatch` says, or None: let the Python loop decode it.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        types: &EventTypes,
        header: &Bound<'py, PyAny>,
        f: &Framed,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let t = f.type_code;
        // SAFETY: a borrowed reference (or NULL) from the dict, which we hold
        let decoder = unsafe {
            let key = uint(py, t as u64);
            let d = ffi::PyDict_GetItemWithError(self.dispatch.as_ptr(), key.as_ptr());
            if d.is_null() {
                if let Some(err) = PyErr::take(py) {
                    return Err(err);
                }
                None
            } else {
                Some(Bound::from_borrowed_ptr(py, d))
            }
        };
        if let Some(dec) = &decoder {
            if dec.as_ptr() == types.dec_header_only.as_ptr() {
                // `decode_header_only` (`scan_headers`): the body is not looked at, and with
                // `headers` the event is not even built (its header is what is handed out)
                return Ok(Some(if self.headers { header.clone() } else { types.header_only.make(py, [header.clone()])? }));
            }
        }
        let ctx = self.ctx.bind(py);
        let body = &self.bytes()[f.body.clone()];
        if let Some(dec) = &decoder {
            let d = dec.as_ptr();
            if d == types.dec_gtid.as_ptr() && (t == GTID || t == ANONYMOUS_GTID) {
                return decode_gtid(py, types, header, t == ANONYMOUS_GTID, body);
            }
            if d == types.dec_xid.as_ptr() && t == XID {
                return decode_xid(py, types, header, body, phls(ctx)?.as_bytes());
            }
            if d == types.dec_query.as_ptr() && t == QUERY {
                let version: u32 = ctx.getattr(pyo3::intern!(py, "binlog_version"))?.extract()?;
                return decode_query(py, types, header, body, phls(ctx)?.as_bytes(), version);
            }
            if d == types.dec_table_map.as_ptr() && t == TABLE_MAP {
                if let Some(ev) = table_map_hit(py, types, header, body, ctx)? {
                    return Ok(Some(ev));
                }
            }
            if d == types.dec_rows.as_ptr() && matches!(t, 23..=25 | 30..=32) {
                let phl = ctx.getattr(pyo3::intern!(py, "post_header_lengths"))?.cast_into::<PyBytes>()?;
                let maps = ctx.getattr(pyo3::intern!(py, "table_maps"))?.cast_into::<PyDict>()?;
                let data = PyBytes::new(py, body);
                // the decoder context's `rows_as_bytes` (`RowImages`): absent or false, the values
                let as_bytes = match ctx.getattr_opt(pyo3::intern!(py, "rows_as_bytes"))? {
                    Some(v) => v.is_truthy()?,
                    None => false,
                };
                let ev = rows_event_inner(py, &types.rows_event, header, t as u32, data.as_any(), &phl, &maps, as_bytes)?;
                if ev.is_some() {
                    return Ok(ev);
                }
            }
        }
        // the body as the Python loop hands it over: a memoryview slice of the held buffer
        let start = f.body.start as ffi::Py_ssize_t;
        let stop = f.body.end as ffi::Py_ssize_t;
        // SAFETY: new references or NULL + exception, checked
        let view = unsafe {
            let slice = Bound::from_owned_ptr_or_err(py, ffi::PySlice_New(
                uint(py, start as u64).as_ptr(), uint(py, stop as u64).as_ptr(), std::ptr::null_mut()))?;
            Bound::from_owned_ptr_or_err(py, ffi::PyObject_GetItem(self.mv.as_ptr(), slice.as_ptr()))?
        };
        Ok(Some(match decoder {
            Some(dec) => dec.call1((header, view, ctx))?,
            None => types.unknown.bind(py).call1((header, view))?,
        }))
    }
}

/// `ctx.post_header_lengths` (`DecodeContext.post_header_length(t)` is `phls[t - 1]`, else 0).
fn phls<'py>(ctx: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let v = ctx.getattr(pyo3::intern!(ctx.py(), "post_header_lengths"))?;
    Ok(v.cast_into::<PyBytes>()?)
}

/// `rows.table_map.decode_table_map` when its cache (`ctx.table_map_cache`) already holds this
/// very body, decoded with the same post-header length and server version, and there is no user
/// schema: the cached fields under the new header, registered in `ctx.table_maps`. A server
/// writes the same TABLE_MAP before every statement, so on OLTP binlogs this is a third of the
/// events. None for anything else (a miss, a user schema, a cache entry of another shape): the
/// Python decoder then decodes the event.
fn table_map_hit<'py>(
    py: Python<'py>,
    types: &EventTypes,
    header: &Bound<'py, PyAny>,
    body: &[u8],
    ctx: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // plain dicts only: PyDict_GetItem / SetItem would skip a subclass's own get / __setitem__
    let Some(cache) = ctx.getattr_opt(pyo3::intern!(py, "table_map_cache"))? else { return Ok(None) };
    let Ok(cache) = cache.cast_into_exact::<PyDict>() else { return Ok(None) };
    let Some(hit) = cache.get_item(PyBytes::new(py, body))? else { return Ok(None) };
    let Ok(hit) = hit.cast_into::<PyTuple>() else { return Ok(None) };
    if hit.len() != 3 || !hit.get_item(2)?.is_none() || !ctx.getattr(pyo3::intern!(py, "schemas"))?.is_none() {
        return Ok(None);
    }
    let phl = phls(ctx)?.as_bytes().get(TABLE_MAP as usize - 1).copied().unwrap_or(0);
    let tag = PyTuple::new(py, [uint(py, phl as u64), ctx.getattr(pyo3::intern!(py, "server_version"))?])?;
    let Ok(args) = hit.get_item(1)?.cast_into::<PyTuple>() else { return Ok(None) };
    if !hit.get_item(0)?.eq(tag)? || args.len() + 1 != types.table_map.offsets.len() {
        return Ok(None);
    }
    let Ok(maps) = ctx.getattr(pyo3::intern!(py, "table_maps"))?.cast_into_exact::<PyDict>() else { return Ok(None) };
    let ev = types.table_map.make_with(py, header, &args)?;
    maps.set_item(args.get_item(0)?, &ev)?; // table_id
    Ok(Some(ev))
}

impl SlotLayout {
    /// `cls(first, *rest)` built slot by slot (`rest` holds every other field, in order).
    fn make_with<'py>(&self, py: Python<'py>, first: &Bound<'py, PyAny>, rest: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        // the caller checked there is one value per slot
        self.fill(py, std::iter::once(first.clone()).chain(rest.iter()))
    }
}
