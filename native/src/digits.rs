//! Decimal digits without `core::fmt`: the renderers format millions of ints and temporal
//! fields, and `write!` / `to_string` went through the formatting machinery for each (about
//! 4% of an ingest task). `itoa` for whole numbers, a fixed-width writer for zero-padded ones.

use crate::short_copy::append_str;

/// `n` in decimal (`str(n)`).
pub(crate) fn push_int(out: &mut String, n: i64) {
    append_str(out, itoa::Buffer::new().format(n));
}

/// `n` zero-padded to `width` digits, as `%0{width}d` and `{n:0width$}` write it (a sign
/// first, then zeros to the width); numbers that do not fit are written whole. Two-digit fields
/// (month, day, hours, minutes, seconds: most of what the temporal renderers write) are one
/// copy from a table; the zeros are one copy, not a `char` each.
pub(crate) fn push_padded(out: &mut String, n: i64, width: usize) {
    if width == 2 && (0..100).contains(&n) {
        let i = 2 * n as usize;
        append_str(out, &DIGIT_PAIRS[i..i + 2]);
        return;
    }
    let fits = u32::try_from(width).ok().and_then(|w| 10u64.checked_pow(w)).is_some_and(|p| (n as u64) < p);
    if width >= 1 && n >= 0 && fits {
        // it fits the width (at most 19 digits: 10^20 is past u64): its digits, right to left,
        // two at a time, over zeros
        let mut buf = [b'0'; 19];
        let (mut v, mut i) = (n as u64, width);
        while v >= 10 {
            i -= 2;
            buf[i..i + 2].copy_from_slice(&two_digits((v % 100) as usize));
            v /= 100;
        }
        if v > 0 {
            buf[i - 1] = b'0' + v as u8;
        }
        // SAFETY: ASCII digits only
        append_str(out, unsafe { std::str::from_utf8_unchecked(&buf[..width]) });
        return;
    }
    let mut buf = itoa::Buffer::new();
    let text = buf.format(n.unsigned_abs());
    if n < 0 {
        out.push('-');
    }
    let mut pad = width.saturating_sub(text.len() + usize::from(n < 0));
    while pad > 0 {
        let k = pad.min(ZEROS.len());
        out.push_str(&ZEROS[..k]);
        pad -= k;
    }
    append_str(out, text);
}

/// `n` (0..100) as two ASCII digits.
#[inline(always)]
pub(crate) fn two_digits(n: usize) -> [u8; 2] {
    let pairs = DIGIT_PAIRS.as_bytes();
    [pairs[2 * n], pairs[2 * n + 1]]
}

/// `00`, `01`, ... `99`, back to back.
const DIGIT_PAIRS: &str = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
const ZEROS: &str = "0000000000000000";

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
        for n in [0i64, 5, -5, 9, 10, 42, 99, 100, 999, 1000, 12345, -12345, i64::MAX, i64::MIN, -1] {
            for width in [0usize, 1, 2, 3, 4, 6, 17, 40] {
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
