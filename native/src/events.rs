//! GTID / ANONYMOUS_GTID, XID and QUERY bodies: the compiled framing loop's ports of
//! `binlog_parser/decoders/gtid_events.py::decode_gtid`, `control.py::decode_xid` and
//! `statement.py::decode_query` (with `decode_status_vars`). On a small-event binlog these are
//! three of every five or so events besides TABLE_MAP and rows.
//!
//! They build the same objects (same classes, field values and types, status variables in the
//! order written) and report no errors: anything the Python decoder would reject returns
//! `Ok(None)`, and the Python loop decodes the event again and raises its exact error.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

use crate::framing::EventTypes;
use crate::{le, uint};

const LOGICAL_TIMESTAMP_TYPECODE: u8 = 2;
const TS_FLAG: u64 = 1 << 55;
const VER_FLAG: u64 = 1 << 31;
const MAX_GNO: u64 = (1 << 63) - 1;

#[inline]
fn field(body: &[u8], off: usize, n: usize) -> Option<u64> {
    body.get(off..off.checked_add(n)?).map(le)
}

fn none(py: Python<'_>) -> Bound<'_, PyAny> {
    py.None().into_bound(py)
}

fn opt(py: Python<'_>, v: Option<u64>) -> Bound<'_, PyAny> {
    match v {
        Some(v) => uint(py, v),
        None => none(py),
    }
}

/// `wire.packed_int` where a value may be NULL (0xfb): (value, next offset), None for 0xff or
/// a short read (the Python decoder raises there).
fn packed_int(body: &[u8], off: usize) -> Option<(Option<u64>, usize)> {
    let first = *body.get(off)?;
    let n = match first {
        0..=0xFA => return Some((Some(first as u64), off + 1)),
        0xFB => return Some((None, off + 1)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        0xFF => return None,
    };
    Some((Some(field(body, off + 1, n)?), off + 1 + n))
}

/// `text()` of decoders/common.py: UTF-8 when valid, else Latin-1.
fn text<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: CPython's decoders, new references or NULL + exception
    unsafe {
        let s = ffi::PyUnicode_DecodeUTF8(raw.as_ptr() as *const _, raw.len() as ffi::Py_ssize_t, std::ptr::null());
        if !s.is_null() {
            return Ok(Bound::from_owned_ptr(py, s));
        }
        let _ = PyErr::take(py);
        Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_DecodeLatin1(
            raw.as_ptr() as *const _, raw.len() as ffi::Py_ssize_t, std::ptr::null()))
    }
}

fn uuid_text(raw: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in raw.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
        s.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
    }
    s
}

/// An immediate value of `width` bytes at `off` whose `flag` bit says the original value follows
/// it (else the original is the immediate one): the commit timestamps and the server versions of
/// a GTID event. `(immediate, original, offset after)`, or None when the bytes end first.
fn immediate_and_original(body: &[u8], off: usize, width: usize, flag: u64) -> Option<(u64, u64, usize)> {
    let immediate = field(body, off, width)?;
    if immediate & flag != 0 {
        Some((immediate & !flag, field(body, off + width, width)?, off + 2 * width))
    } else {
        Some((immediate, immediate, off + width))
    }
}

/// The optional tail of a GTID event after the GNO: logical clock, commit timestamps,
/// transaction length, server versions, commit group ticket (each None when not written),
/// or None where the Python decoder raises.
fn gtid_tail(body: &[u8]) -> Option<[Option<u64>; 8]> {
    let n = body.len();
    let mut off = 25;
    let mut v: [Option<u64>; 8] = [None; 8];
    if off + 1 > n {
        return Some(v);
    }
    let lt = body[off];
    off += 1;
    if lt != LOGICAL_TIMESTAMP_TYPECODE || off + 16 > n {
        return Some(v);
    }
    v[0] = field(body, off, 8);
    v[1] = field(body, off + 8, 8);
    off += 16;
    if off + 7 > n {
        return Some(v);
    }
    let (immediate, original, next) = immediate_and_original(body, off, 7, TS_FLAG)?;
    (v[2], v[3], off) = (Some(immediate), Some(original), next);
    if off + 1 <= n {
        let (trx_len, next) = packed_int(body, off)?;
        v[4] = trx_len;
        off = next;
    }
    if off + 4 <= n {
        let (immediate, original, next) = immediate_and_original(body, off, 4, VER_FLAG)?;
        (v[5], v[6], off) = (Some(immediate), Some(original), next);
        if off + 8 <= n {
            v[7] = field(body, off, 8);
        }
    }
    Some(v)
}

/// A GTID or ANONYMOUS_GTID event's values as `decode_gtid` decodes them: the GTID text (None
/// for an anonymous one), the flags, the UUID text, the GNO and `gtid_tail`'s values.
pub(crate) struct GtidParts {
    pub gtid: Option<String>,
    pub flags: u8,
    pub uuid: String,
    pub gno: u64,
    /// last_committed, sequence_number, immediate and original commit timestamps, transaction
    /// length, immediate and original server versions, commit group ticket
    pub tail: [Option<u64>; 8],
}

/// `GtidParts` of a GTID (33) / ANONYMOUS_GTID (34) body, or None: let the Python decoder
/// decode it (and raise what is wrong).
pub(crate) fn gtid_parts(body: &[u8], anonymous: bool) -> Option<GtidParts> {
    if body.len() < 25 {
        return None;
    }
    let gno = le(&body[17..25]);
    if (anonymous && gno != 0) || (!anonymous && !(1..MAX_GNO).contains(&gno)) {
        return None;
    }
    let tail = gtid_tail(body)?;
    let uuid = uuid_text(&body[1..17]);
    let gtid = (!anonymous).then(|| {
        let mut text = String::with_capacity(uuid.len() + 21);
        text.push_str(&uuid);
        text.push(':');
        text.push_str(itoa::Buffer::new().format(gno));
        text
    });
    Some(GtidParts { gtid, flags: body[0], uuid, gno, tail })
}

/// GTID (33) / ANONYMOUS_GTID (34): `GtidEvent`.
pub(crate) fn decode_gtid<'py>(
    py: Python<'py>,
    types: &EventTypes,
    header: &Bound<'py, PyAny>,
    anonymous: bool,
    body: &[u8],
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(p) = gtid_parts(body, anonymous) else { return Ok(None) };
    let gtid = match &p.gtid {
        Some(g) => PyString::new(py, g).into_any(),
        None => none(py),
    };
    let [lc, seq, imm_ts, orig_ts, trx_len, imm_ver, orig_ver, ticket] = p.tail;
    Ok(Some(types.gtid.make(py, [
        header.clone(), gtid, uint(py, p.flags as u64), PyString::new(py, &p.uuid).into_any(), none(py),
        uint(py, p.gno), opt(py, lc), opt(py, seq), opt(py, imm_ts), opt(py, orig_ts), opt(py, trx_len),
        opt(py, imm_ver), opt(py, orig_ver), opt(py, ticket),
    ])?))
}

/// An XID (16) body's transaction id as `decode_xid` reads it (`phls`: the post-header
/// lengths), or None: let the Python decoder decode it.
pub(crate) fn xid_value(body: &[u8], phls: &[u8]) -> Option<u64> {
    let ph = phls.get(15).copied().unwrap_or(0) as usize;
    field(body, ph, 8)
}

/// XID (16): `XidEvent`.
pub(crate) fn decode_xid<'py>(
    py: Python<'py>,
    types: &EventTypes,
    header: &Bound<'py, PyAny>,
    body: &[u8],
    phls: &[u8],
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(xid) = xid_value(body, phls) else { return Ok(None) };
    Ok(Some(types.xid.make(py, [header.clone(), uint(py, xid)])?))
}

/// QUERY (2): `QueryEvent` (`statement._decode_query_like`).
pub(crate) fn decode_query<'py>(
    py: Python<'py>,
    types: &EventTypes,
    header: &Bound<'py, PyAny>,
    body: &[u8],
    phls: &[u8],
    binlog_version: u32,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let mut ph = phls.get(1).copied().unwrap_or(0) as usize;
    if ph < 11 {
        ph = if binlog_version >= 4 { 13 } else { 11 };
    }
    if body.len() < ph {
        return Ok(None);
    }
    let db_len = body[8] as usize;
    let sv_len = if ph >= 13 { le(&body[11..13]) as usize } else { 0 };
    let mut off = ph;
    let Some(block) = body.get(off..off + sv_len) else { return Ok(None) };
    let Some((status, unknown)) = status_vars(py, block)? else { return Ok(None) };
    off += sv_len;
    if off + db_len + 1 > body.len() {
        return Ok(None);
    }
    let schema = text(py, &body[off..off + db_len])?;
    off += db_len + 1;
    Ok(Some(types.query.make(py, [
        header.clone(), uint(py, le(&body[0..4])), uint(py, le(&body[4..8])), uint(py, le(&body[9..11])),
        schema, text(py, &body[off..])?, status.into_any(), opt(py, unknown),
        PyBool::new(py, false).to_owned().into_any(),
    ])?))
}

/// The status variables that are one little-endian unsigned integer: code -> (name, bytes)
/// (`statement._FIXED_STATUS_VARS`); names interned once.
fn fixed_status_var<'py>(py: Python<'py>, code: u8) -> Option<(&'py Bound<'py, PyString>, usize)> {
    macro_rules! var {
        ($name:literal, $size:literal) => {
            (pyo3::intern!(py, $name), $size)
        };
    }
    Some(match code {
        0 => var!("flags2", 4),
        1 => var!("sql_mode", 8),
        7 => var!("lc_time_names", 2),
        8 => var!("charset_database", 2),
        9 => var!("table_map_for_update", 8),
        10 => var!("master_data_written", 4),
        13 => var!("microseconds", 3),
        14 => var!("commit_ts", 8),
        15 => var!("commit_ts2", 8),
        17 => var!("ddl_xid", 8),
        18 => var!("default_collation_for_utf8mb4", 2),
        19 => var!("sql_require_primary_key", 1),
        20 => var!("default_table_encryption", 1),
        128 => var!("hrnow", 3),
        129 => var!("xid", 8),
        130 => var!("gtid_flags3", 1),
        _ => return None,
    })
}

/// `statement.decode_status_vars`: (vars by name, the first unknown code), or None where the
/// Python decoder raises.
fn status_vars<'py>(py: Python<'py>, sv: &[u8]) -> PyResult<Option<(Bound<'py, PyDict>, Option<u64>)>> {
    let out = PyDict::new(py);
    let mut off = 0;
    let n = sv.len();
    while off < n {
        let code = sv[off];
        off += 1;
        if let Some((name, size)) = fixed_status_var(py, code) {
            let Some(v) = field(sv, off, size) else { return Ok(None) };
            out.set_item(name, uint(py, v))?;
            off += size;
        } else {
            match shaped_status_var(py, sv, off, code, &out)? {
                Shaped::After(after) => off = after,
                Shaped::Unknown => return Ok(Some((out, Some(code as u64)))),
                Shaped::Bad => return Ok(None),
            }
        }
        if off > n {
            return Ok(None);
        }
    }
    Ok(Some((out, None)))
}

enum Shaped {
    After(usize),
    Unknown,
    Bad,
}

/// `_lstr`: a one-byte length and the text.
fn lstr<'py>(py: Python<'py>, sv: &[u8], off: usize) -> PyResult<Option<(Bound<'py, PyAny>, usize)>> {
    let Some(n) = field(sv, off, 1) else { return Ok(None) };
    let start = off + 1;
    let Some(raw) = sv.get(start..start + n as usize) else { return Ok(None) };
    Ok(Some((text(py, raw)?, start + n as usize)))
}

/// A dict of little-endian u16 fields at `off` (auto_increment, charset, the collation pairs).
fn u16_dict<'py>(py: Python<'py>, sv: &[u8], off: usize, names: &[&Bound<'py, PyString>]) -> PyResult<Option<Bound<'py, PyDict>>> {
    let d = PyDict::new(py);
    for (i, name) in names.iter().enumerate() {
        let Some(v) = field(sv, off + 2 * i, 2) else { return Ok(None) };
        d.set_item(*name, uint(py, v))?;
    }
    Ok(Some(d))
}

/// `statement._decode_shaped_status_var`, writing into `out`.
fn shaped_status_var<'py>(py: Python<'py>, sv: &[u8], off: usize, code: u8, out: &Bound<'py, PyDict>) -> PyResult<Shaped> {
    use pyo3::intern;
    let bad = Ok(Shaped::Bad);
    match code {
        2 | 5 | 6 => {
            let Some((s, after)) = lstr(py, sv, off)? else { return bad };
            out.set_item(if code == 5 { intern!(py, "time_zone") } else { intern!(py, "catalog") }, s)?;
            Ok(Shaped::After(if code == 2 { after + 1 } else { after })) // Q_CATALOG: + its NUL
        }
        3 | 4 => {
            let names: &[&Bound<'py, PyString>] = if code == 3 {
                &[intern!(py, "increment"), intern!(py, "offset")]
            } else {
                &[intern!(py, "client"), intern!(py, "connection"), intern!(py, "server")]
            };
            let Some(d) = u16_dict(py, sv, off, names)? else { return bad };
            out.set_item(if code == 3 { intern!(py, "auto_increment") } else { intern!(py, "charset") }, d)?;
            Ok(Shaped::After(off + 2 * names.len()))
        }
        11 => {
            let Some((user, at)) = lstr(py, sv, off)? else { return bad };
            let Some((host, after)) = lstr(py, sv, at)? else { return bad };
            let d = PyDict::new(py);
            d.set_item(intern!(py, "user"), user)?;
            d.set_item(intern!(py, "host"), host)?;
            out.set_item(intern!(py, "invoker"), d)?;
            Ok(Shaped::After(after))
        }
        12 => updated_db_names(py, sv, off, out),
        16 => {
            let Some(v) = field(sv, off, 1) else { return bad };
            out.set_item(intern!(py, "explicit_defaults_ts"), v != 0)?;
            Ok(Shaped::After(off + 1))
        }
        131 => {
            let Some(count) = field(sv, off, 1) else { return bad };
            let mut at = off + 1;
            let pairs = PyList::empty(py);
            for _ in 0..count {
                let Some(d) = u16_dict(py, sv, at, &[intern!(py, "charset"), intern!(py, "collation")])? else { return bad };
                pairs.append(d)?;
                at += 4;
            }
            out.set_item(intern!(py, "character_set_collations"), pairs)?;
            Ok(Shaped::After(at))
        }
        _ => Ok(Shaped::Unknown),
    }
}

/// Q_UPDATED_DB_NAMES: a count, then NUL-terminated names (254: too many, None).
fn updated_db_names<'py>(py: Python<'py>, sv: &[u8], off: usize, out: &Bound<'py, PyDict>) -> PyResult<Shaped> {
    let Some(count) = field(sv, off, 1) else { return Ok(Shaped::Bad) };
    let mut at = off + 1;
    let names = if count == 254 {
        none(py)
    } else {
        let list = PyList::empty(py);
        for _ in 0..count {
            let rest = sv.get(at..).unwrap_or(&[]);
            let Some(end) = rest.iter().position(|&b| b == 0) else { return Ok(Shaped::Bad) };
            list.append(text(py, &rest[..end])?)?;
            at += end + 1;
        }
        list.into_any()
    };
    out.set_item(pyo3::intern!(py, "updated_db_names"), names)?;
    Ok(Shaped::After(at))
}
