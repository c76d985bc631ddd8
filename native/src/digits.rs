//! Decimal digits without `core::fmt`: the renderers format millions of ints and temporal
//! fields, and `write!` / `to_string` went through the formatting machinery for each (about
//! 4% of an ingest task). `itoa` for whole numbers, a fixed-width writer for zero-padded ones.

/// `n` in decimal (`str(n)`).
pub(crate) fn push_int(out: &mut String, n: i64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// `n` zero-padded to `width` digits, as `%0{width}d` and `{n:0width$}` write it (a sign
/// first, then zeros to the width); numbers that do not fit are written whole.
pub(crate) fn push_padded(out: &mut String, n: i64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let text = buf.format(n.unsigned_abs());
    if n < 0 {
        out.push('-');
    }
    let pad = width.saturating_sub(text.len() + usize::from(n < 0));
    for _ in 0..pad {
        out.push('0');
    }
    out.push_str(text);
}

/// `bytes` as lowercase hex (`bytes.hex()`).
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 * bytes.len());
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_is_the_format_macro() {
        for n in [0i64, 5, -5, 42, 999, 1000, 12345, -12345, i64::MAX, i64::MIN, -1] {
            for width in [0usize, 1, 2, 4, 6] {
                let mut s = String::new();
                push_padded(&mut s, n, width);
                assert_eq!(s, format!("{n:0width$}"), "{n} {width}");
            }
            let mut s = String::new();
            push_int(&mut s, n);
            assert_eq!(s, n.to_string());
        }
        let mut s = String::new();
        push_hex(&mut s, &[0, 0x0f, 0xa0, 0xff]);
        assert_eq!(s, "000fa0ff");
    }
}
