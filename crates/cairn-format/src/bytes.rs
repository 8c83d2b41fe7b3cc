//! Little-endian primitives shared by the codecs: a bounds-checked cursor over
//! untrusted bytes, LEB128 varints, and writers.
//!
//! Every read names the object (`what`) and the field, and a short read is a
//! [`Error::Corrupt`] "truncated at offset N" rather than a panic. Varints are
//! canonical (no redundant trailing zero groups) because tree nodes and
//! directory listings are identified by the hash of their bytes: one value
//! must have exactly one encoding.

use cairn_core::{Error, Fingerprint, Result};

/// Longest LEB128 encoding of a `u64`.
pub(crate) const MAX_VARINT_LEN: usize = 10;

/// A forward-only cursor over untrusted bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(what: &'a str, buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0, what }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// A [`Error::Corrupt`] about this object at the current offset.
    pub(crate) fn corrupt(&self, detail: impl std::fmt::Display) -> Error {
        Error::corrupt(self.what, format!("{detail} (at offset {})", self.pos))
    }

    pub(crate) fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::corrupt(
                self.what,
                format!(
                    "truncated at offset {}: {field} needs {n} bytes, {} left",
                    self.pos,
                    self.remaining()
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16(&mut self, field: &str) -> Result<u16> {
        self.array(field).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, field: &str) -> Result<u32> {
        self.array(field).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, field: &str) -> Result<u64> {
        self.array(field).map(u64::from_le_bytes)
    }

    pub(crate) fn i64(&mut self, field: &str) -> Result<i64> {
        self.array(field).map(i64::from_le_bytes)
    }

    /// A fingerprint of `width` bytes; `width` must already be validated (1..=32).
    pub(crate) fn fp(&mut self, width: usize, field: &str) -> Result<Fingerprint> {
        let b = self.take(width, field)?;
        Fingerprint::try_from_slice(b)
            .ok_or_else(|| self.corrupt(format!("fingerprint width {width} out of range")))
    }

    /// A canonical unsigned LEB128 varint.
    pub(crate) fn varint(&mut self, field: &str) -> Result<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..MAX_VARINT_LEN {
            let byte = self.u8(field)?;
            let bits = u64::from(byte & 0x7f);
            if i == MAX_VARINT_LEN - 1 && byte > 1 {
                self.pos = start;
                return Err(self.corrupt(format!("{field}: varint overflows u64")));
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                if byte == 0 && i > 0 {
                    self.pos = start;
                    return Err(self.corrupt(format!("{field}: non-canonical varint")));
                }
                return Ok(value);
            }
        }
        self.pos = start;
        Err(self.corrupt(format!(
            "{field}: varint longer than {MAX_VARINT_LEN} bytes"
        )))
    }

    /// A canonical varint that must fit 32 bits.
    pub(crate) fn varint_u32(&mut self, field: &str) -> Result<u32> {
        let v = self.varint(field)?;
        u32::try_from(v).map_err(|_| self.corrupt(format!("{field} {v} exceeds 32 bits")))
    }

    /// A varint length prefix, checked against the bytes that remain so the
    /// caller may allocate it.
    pub(crate) fn len_prefix(&mut self, field: &str) -> Result<usize> {
        let n = self.varint(field)?;
        if n > self.remaining() as u64 {
            return Err(self.corrupt(format!(
                "truncated: {field} says {n} bytes, {} left",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    /// Err unless every byte was consumed.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.corrupt(format!("{} trailing bytes", self.remaining())));
        }
        Ok(())
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a little-endian `u32` at `off`; the caller has checked the length.
pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

/// Reads a little-endian `u64` at `off`; the caller has checked the length.
pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Writes a little-endian `u32` at `off`; the caller sized `b`.
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Writes a little-endian `u64` at `off`; the caller sized `b`.
pub(crate) fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Renders a magic for messages: printable ASCII as is, other bytes escaped.
pub(crate) fn show_magic(m: &[u8]) -> String {
    m.iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect()
}

/// Checks the fingerprint width read from a file.
pub(crate) fn check_fp_width(what: &str, width: usize) -> Result<()> {
    if !(1..=cairn_core::MAX_FINGERPRINT_LEN).contains(&width) {
        return Err(Error::corrupt(
            what,
            format!(
                "fingerprint width {width} out of range 1..={}",
                cairn_core::MAX_FINGERPRINT_LEN
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_canonical() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut r = Reader::new("t", &out);
            assert_eq!(r.varint("v").unwrap(), v);
            r.finish().unwrap();
            for cut in 0..out.len() {
                assert!(Reader::new("t", &out[..cut]).varint("v").is_err());
            }
        }
        // 0 encoded in two bytes is not canonical.
        assert!(Reader::new("t", &[0x80, 0x00]).varint("v").is_err());
        // 11 bytes, and a 10th byte carrying more than one bit, overflow.
        assert!(Reader::new("t", &[0xff; 11]).varint("v").is_err());
        let mut big = vec![0xff; 9];
        big.push(0x02);
        assert!(Reader::new("t", &big).varint("v").is_err());
    }

    #[test]
    fn truncation_names_offset() {
        let mut r = Reader::new("thing", &[1, 2, 3]);
        r.u8("a").unwrap();
        let e = r.u32("b").unwrap_err().to_string();
        assert!(e.contains("thing") && e.contains("offset 1"), "{e}");
        assert!(Reader::new("t", &[5]).len_prefix("n").is_err());
    }

    #[test]
    fn magic_display() {
        assert_eq!(show_magic(b"AB\x00"), "AB\\x00");
    }
}
