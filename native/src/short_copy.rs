//! Appending short byte strings without a call to libc's `memmove`.
//!
//! The renderers append millions of short pieces a task: two-digit date fields, integers, column
//! names, the values themselves, each into its column and its JSON. `extend_from_slice` of a
//! length the compiler does not know is a call to `memmove`, and in perf those calls were 13% of
//! a range's decoding, nearly all of them for a few bytes. Up to 16 bytes are copied here with
//! two overlapping fixed-size moves, which the compiler turns into a few instructions.

/// `bytes` appended to `out` (what `out.extend_from_slice(bytes)` does).
#[inline(always)]
pub(crate) fn append(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if n > 16 {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(n);
    let len = out.len();
    // SAFETY: `reserve` made room for `n` bytes after `len`. Each move reads inside `bytes`
    // (`n - k` is never below 0 in its branch) and writes inside `len..len + n`; the moves overlap
    // in the middle when `n` is under twice their size, writing the same bytes twice. Every byte
    // of `len..len + n` is written before `set_len`.
    unsafe {
        let src = bytes.as_ptr();
        let dst = out.as_mut_ptr().add(len);
        if n >= 8 {
            let (head, tail) = ((src as *const u64).read_unaligned(), (src.add(n - 8) as *const u64).read_unaligned());
            (dst as *mut u64).write_unaligned(head);
            (dst.add(n - 8) as *mut u64).write_unaligned(tail);
        } else if n >= 4 {
            let (head, tail) = ((src as *const u32).read_unaligned(), (src.add(n - 4) as *const u32).read_unaligned());
            (dst as *mut u32).write_unaligned(head);
            (dst.add(n - 4) as *mut u32).write_unaligned(tail);
        } else if n >= 2 {
            let (head, tail) = ((src as *const u16).read_unaligned(), (src.add(n - 2) as *const u16).read_unaligned());
            (dst as *mut u16).write_unaligned(head);
            (dst.add(n - 2) as *mut u16).write_unaligned(tail);
        } else if n == 1 {
            *dst = *src;
        }
        out.set_len(len + n);
    }
}

/// `s` appended to `out` (what `out.push_str(s)` does).
#[inline(always)]
pub(crate) fn append_str(out: &mut String, s: &str) {
    // SAFETY: a whole `str` appended to a `String` leaves it valid UTF-8
    append(unsafe { out.as_mut_vec() }, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_is_extend_from_slice_for_every_length_and_start() {
        let source: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37).wrapping_add(11)).collect();
        for start in [0usize, 1, 3, 7, 15] {
            for n in 0..=source.len() {
                for offset in [0usize, 1, 5] {
                    let piece = &source[offset.min(source.len() - n)..][..n];
                    let mut got: Vec<u8> = source[..start].to_vec();
                    got.shrink_to_fit();
                    let mut want = got.clone();
                    append(&mut got, piece);
                    want.extend_from_slice(piece);
                    assert_eq!(got, want, "start {start} n {n} offset {offset}");
                    append(&mut got, piece);
                    want.extend_from_slice(piece);
                    assert_eq!(got, want, "twice: start {start} n {n} offset {offset}");
                }
            }
        }
        let mut s = String::from("é");
        append_str(&mut s, "ab€c");
        append_str(&mut s, "");
        assert_eq!(s, "éab€c");
    }
}
