//! Containers: the self-describing, immutable unit of storage of DDFS
//! (`001_3652cceaf162c5a1.txt` §3.3 "Container Manager", §4.2 "Stream-Informed
//! Segment Layout").
//!
//! ```text
//! header (32) | data section (stored payloads) | metadata section | trailer (72)
//! ```
//!
//! The data section is the concatenation of the chunks' stored (maybe
//! compressed) payloads in stream order. The metadata section lists one
//! descriptor per chunk, in the same order: fingerprint, chunk kind, tree
//! level, codec, offset/length in the data section, raw length. The fixed-size
//! trailer at the very end locates both sections and carries their CRC-32C
//! checksums, so a reader fetches the trailer plus metadata with one small
//! read from the end of the file ([`TAIL_READ_HINT`], [`decode_tail`]) without
//! touching the data section. That one read is what Locality Preserved
//! Caching (DDFS §4.3) and physical GC depend on.
//!
//! Every byte is listed in `docs/FORMAT.md`; `tests/golden.rs` pins it.

use std::ops::Range;

use cairn_core::{ChunkKind, CompressionCodec, ContainerId, Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, get_u32, get_u64, show_magic};

/// First 8 bytes of every container.
pub const CONTAINER_MAGIC: [u8; 8] = *b"CAIRNCTR";
/// Magic inside the trailer, 12 bytes before the end of the file.
pub const CONTAINER_TRAILER_MAGIC: [u8; 8] = *b"CAIRNEND";
/// The container format version this build writes and the newest it reads.
pub const CONTAINER_VERSION: u32 = 1;

// Header: magic | version u32 | fp_width u8 | reserved [3] | id u64 | reserved u32 | crc32c u32
const HDR_MAGIC_OFFSET: usize = 0;
const HDR_MAGIC_LEN: usize = 8;
const HDR_VERSION_OFFSET: usize = HDR_MAGIC_OFFSET + HDR_MAGIC_LEN;
const HDR_VERSION_LEN: usize = 4;
const HDR_FP_WIDTH_OFFSET: usize = HDR_VERSION_OFFSET + HDR_VERSION_LEN;
const HDR_FP_WIDTH_LEN: usize = 1;
const HDR_RESERVED1_OFFSET: usize = HDR_FP_WIDTH_OFFSET + HDR_FP_WIDTH_LEN;
const HDR_RESERVED1_LEN: usize = 3;
const HDR_ID_OFFSET: usize = HDR_RESERVED1_OFFSET + HDR_RESERVED1_LEN;
const HDR_ID_LEN: usize = 8;
const HDR_RESERVED2_OFFSET: usize = HDR_ID_OFFSET + HDR_ID_LEN;
const HDR_RESERVED2_LEN: usize = 4;
const HDR_CRC_OFFSET: usize = HDR_RESERVED2_OFFSET + HDR_RESERVED2_LEN;
const HDR_CRC_LEN: usize = 4;
/// Size of the fixed header; the data section starts here.
pub const CONTAINER_HEADER_LEN: usize = HDR_CRC_OFFSET + HDR_CRC_LEN;

// Descriptor (in the metadata section): fp [w] | kind u8 | level u8 | codec u8
// | offset u32 | stored_len u32 | raw_len u32. Offsets relative to the fp end.
const DESC_KIND_OFFSET: usize = 0;
const DESC_LEVEL_OFFSET: usize = DESC_KIND_OFFSET + 1;
const DESC_CODEC_OFFSET: usize = DESC_LEVEL_OFFSET + 1;
const DESC_OFFSET_OFFSET: usize = DESC_CODEC_OFFSET + 1;
const DESC_STORED_LEN_OFFSET: usize = DESC_OFFSET_OFFSET + 4;
const DESC_RAW_LEN_OFFSET: usize = DESC_STORED_LEN_OFFSET + 4;
/// Bytes of a descriptor besides its fingerprint.
pub const DESCRIPTOR_FIXED_LEN: usize = DESC_RAW_LEN_OFFSET + 4;
/// Bytes of the descriptor count that opens the metadata section.
const META_COUNT_LEN: usize = 4;

// Trailer: the last CONTAINER_TRAILER_LEN bytes of the file.
const TR_ID_OFFSET: usize = 0;
const TR_DATA_OFFSET_OFFSET: usize = TR_ID_OFFSET + 8;
const TR_DATA_LEN_OFFSET: usize = TR_DATA_OFFSET_OFFSET + 8;
const TR_META_OFFSET_OFFSET: usize = TR_DATA_LEN_OFFSET + 8;
const TR_META_LEN_OFFSET: usize = TR_META_OFFSET_OFFSET + 8;
const TR_COUNT_OFFSET: usize = TR_META_LEN_OFFSET + 8;
const TR_DATA_CRC_OFFSET: usize = TR_COUNT_OFFSET + 4;
const TR_META_CRC_OFFSET: usize = TR_DATA_CRC_OFFSET + 4;
const TR_FP_WIDTH_OFFSET: usize = TR_META_CRC_OFFSET + 4;
const TR_RESERVED_OFFSET: usize = TR_FP_WIDTH_OFFSET + 1;
const TR_RESERVED_LEN: usize = 3;
const TR_VERSION_OFFSET: usize = TR_RESERVED_OFFSET + TR_RESERVED_LEN;
const TR_MAGIC_OFFSET: usize = TR_VERSION_OFFSET + 4;
const TR_MAGIC_LEN: usize = 8;
const TR_CRC_OFFSET: usize = TR_MAGIC_OFFSET + TR_MAGIC_LEN;
/// Size of the fixed trailer at the end of every container.
pub const CONTAINER_TRAILER_LEN: usize = TR_CRC_OFFSET + 4;

/// Smallest valid container: header, empty data section, metadata count, trailer.
pub const MIN_CONTAINER_LEN: usize = CONTAINER_HEADER_LEN + META_COUNT_LEN + CONTAINER_TRAILER_LEN;

/// Bytes a reader should fetch from the end of a container to get trailer and
/// metadata in one read: a 4 MiB container of 8 KiB chunks compressed 2:1
/// holds ~1K chunks, ~47 KiB of metadata with 32-byte fingerprints (DDFS
/// §4.2 estimates 64 KiB for its 64-byte descriptors).
pub const TAIL_READ_HINT: usize = 64 * 1024;

/// One chunk's entry in a container's metadata section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub fp: Fingerprint,
    pub kind: ChunkKind,
    /// Tree level: 0 for leaves, n >= 1 for Ln recipe nodes (`003` §2).
    pub level: u8,
    pub codec: CompressionCodec,
    /// Offset of the stored payload within the data section.
    pub offset: u32,
    pub stored_len: u32,
    pub raw_len: u32,
}

/// Bytes of one descriptor for fingerprints `fp_width` wide.
pub const fn descriptor_len(fp_width: usize) -> usize {
    fp_width + DESCRIPTOR_FIXED_LEN
}

/// Bytes of a metadata section listing `chunks` descriptors.
pub const fn metadata_len(chunks: usize, fp_width: usize) -> usize {
    META_COUNT_LEN + chunks * descriptor_len(fp_width)
}

/// Total bytes of a container with `chunks` chunks and `data_len` payload bytes.
pub const fn encoded_len(chunks: usize, data_len: usize, fp_width: usize) -> usize {
    CONTAINER_HEADER_LEN + data_len + metadata_len(chunks, fp_width) + CONTAINER_TRAILER_LEN
}

/// What a container's trailer and metadata section say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerMeta {
    pub id: ContainerId,
    pub fp_width: usize,
    pub descriptors: Vec<Descriptor>,
    /// File offset of the data section (= [`CONTAINER_HEADER_LEN`]).
    pub data_offset: u64,
    pub data_len: u64,
    pub data_crc: u32,
    pub file_size: u64,
}

/// Result of [`decode_tail`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailDecode {
    Meta(ContainerMeta),
    /// The metadata section starts before the given tail: fetch this many
    /// bytes from the end and call again. Always `tail.len() < n <= file_size`.
    NeedTail(usize),
}

/// The file range `[start, end)` of a chunk's stored payload, for reading
/// one chunk (or a run of chunks) without the rest of the data section.
pub fn chunk_file_range(meta: &ContainerMeta, d: &Descriptor) -> Range<u64> {
    let start = meta.data_offset.saturating_add(u64::from(d.offset));
    start..start.saturating_add(u64::from(d.stored_len))
}

fn what_for(id: ContainerId) -> String {
    format!("container {id}")
}

/// Decodes trailer and metadata from the last `tail.len()` bytes of a
/// container file of `file_size` bytes. Verifies the trailer and metadata
/// checksums and every descriptor's bounds, but not the data section.
pub fn decode_tail(file_size: u64, tail: &[u8]) -> Result<TailDecode> {
    const WHAT: &str = "container";
    if tail.len() as u64 > file_size {
        return Err(Error::invalid(format!(
            "container tail of {} bytes is longer than the {file_size}-byte file",
            tail.len()
        )));
    }
    if file_size < MIN_CONTAINER_LEN as u64 {
        return Err(Error::corrupt(
            WHAT,
            format!("truncated: {file_size} bytes is less than the minimum {MIN_CONTAINER_LEN}"),
        ));
    }
    if tail.len() < CONTAINER_TRAILER_LEN {
        return Ok(TailDecode::NeedTail(CONTAINER_TRAILER_LEN));
    }
    let t = &tail[tail.len() - CONTAINER_TRAILER_LEN..];
    let magic = &t[TR_MAGIC_OFFSET..TR_MAGIC_OFFSET + TR_MAGIC_LEN];
    if magic != CONTAINER_TRAILER_MAGIC {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "bad trailer magic \"{}\" (expected \"{}\"; truncated or not a container)",
                show_magic(magic),
                show_magic(&CONTAINER_TRAILER_MAGIC)
            ),
        ));
    }
    check_version(WHAT, get_u32(t, TR_VERSION_OFFSET))?;
    let stored = get_u32(t, TR_CRC_OFFSET);
    let actual = crc32c::crc32c(&t[..TR_CRC_OFFSET]);
    if stored != actual {
        return Err(Error::corrupt(
            WHAT,
            format!("trailer checksum mismatch: stored {stored:08x}, computed {actual:08x}"),
        ));
    }
    let id = ContainerId(get_u64(t, TR_ID_OFFSET));
    let what = what_for(id);
    if t[TR_RESERVED_OFFSET..TR_RESERVED_OFFSET + TR_RESERVED_LEN] != [0; TR_RESERVED_LEN] {
        return Err(Error::corrupt(&what, "trailer reserved bytes are not zero"));
    }
    let fp_width = t[TR_FP_WIDTH_OFFSET] as usize;
    check_fp_width(&what, fp_width)?;
    let data_offset = get_u64(t, TR_DATA_OFFSET_OFFSET);
    let data_len = get_u64(t, TR_DATA_LEN_OFFSET);
    let meta_offset = get_u64(t, TR_META_OFFSET_OFFSET);
    let meta_len = get_u64(t, TR_META_LEN_OFFSET);
    let count = get_u32(t, TR_COUNT_OFFSET);
    let data_crc = get_u32(t, TR_DATA_CRC_OFFSET);
    let meta_crc = get_u32(t, TR_META_CRC_OFFSET);

    if data_offset != CONTAINER_HEADER_LEN as u64 {
        return Err(Error::corrupt(
            &what,
            format!("data section offset {data_offset}, expected {CONTAINER_HEADER_LEN}"),
        ));
    }
    if data_offset.checked_add(data_len) != Some(meta_offset) {
        return Err(Error::corrupt(
            &what,
            format!(
                "metadata offset {meta_offset} does not follow the data section ({data_offset} + {data_len})"
            ),
        ));
    }
    let end = meta_offset
        .checked_add(meta_len)
        .and_then(|e| e.checked_add(CONTAINER_TRAILER_LEN as u64));
    if end != Some(file_size) {
        return Err(Error::corrupt(
            &what,
            format!(
                "sections end at {meta_offset} + {meta_len} + {CONTAINER_TRAILER_LEN}, file is {file_size} bytes (truncated or extended)"
            ),
        ));
    }
    let expected_meta = (count as u64)
        .checked_mul(descriptor_len(fp_width) as u64)
        .and_then(|n| n.checked_add(META_COUNT_LEN as u64));
    if expected_meta != Some(meta_len) {
        return Err(Error::corrupt(
            &what,
            format!(
                "metadata section is {meta_len} bytes, {count} descriptors of width {fp_width} need {}",
                expected_meta.unwrap_or(u64::MAX)
            ),
        ));
    }
    // needed <= file_size (checked above) but may not fit a 32-bit usize.
    let needed = meta_len + CONTAINER_TRAILER_LEN as u64;
    if needed > tail.len() as u64 {
        let n = usize::try_from(needed).map_err(|_| {
            Error::corrupt(
                &what,
                format!("metadata section of {meta_len} bytes is too large"),
            )
        })?;
        return Ok(TailDecode::NeedTail(n));
    }
    let meta_start = tail.len() - needed as usize;
    let meta = &tail[meta_start..tail.len() - CONTAINER_TRAILER_LEN];
    let actual = crc32c::crc32c(meta);
    if actual != meta_crc {
        return Err(Error::corrupt(
            &what,
            format!("metadata checksum mismatch: stored {meta_crc:08x}, computed {actual:08x}"),
        ));
    }
    let descriptors = decode_descriptors(&what, meta, meta_offset, count, fp_width, data_len)?;
    Ok(TailDecode::Meta(ContainerMeta {
        id,
        fp_width,
        descriptors,
        data_offset,
        data_len,
        data_crc,
        file_size,
    }))
}

fn check_version(what: &str, version: u32) -> Result<()> {
    if version > CONTAINER_VERSION {
        return Err(Error::UnsupportedVersion {
            what: what.to_string(),
            found: version,
            supported: CONTAINER_VERSION,
        });
    }
    if version == 0 {
        return Err(Error::corrupt(what, "version 0 is not a valid version"));
    }
    Ok(())
}

fn decode_descriptors(
    what: &str,
    meta: &[u8],
    meta_offset: u64,
    count: u32,
    fp_width: usize,
    data_len: u64,
) -> Result<Vec<Descriptor>> {
    let stored_count = get_u32(meta, 0);
    if stored_count != count {
        return Err(Error::corrupt(
            what,
            format!("metadata lists {stored_count} descriptors, trailer says {count}"),
        ));
    }
    let dlen = descriptor_len(fp_width);
    // `meta` holds exactly count * dlen bytes after the count (checked by the caller).
    let mut out = Vec::with_capacity(count as usize);
    for (i, raw) in meta[META_COUNT_LEN..].chunks_exact(dlen).enumerate() {
        let at = meta_offset + (META_COUNT_LEN + i * dlen) as u64;
        let bad = |detail: String| {
            Error::corrupt(what, format!("descriptor {i} at offset {at}: {detail}"))
        };
        let fp = Fingerprint::try_from_slice(&raw[..fp_width])
            .ok_or_else(|| bad("bad fingerprint width".into()))?;
        let f = &raw[fp_width..];
        let kind = ChunkKind::from_u8(f[DESC_KIND_OFFSET])
            .ok_or_else(|| bad(format!("unknown chunk kind {}", f[DESC_KIND_OFFSET])))?;
        let codec = CompressionCodec::from_u8(f[DESC_CODEC_OFFSET])
            .ok_or_else(|| bad(format!("unknown codec {}", f[DESC_CODEC_OFFSET])))?;
        let d = Descriptor {
            fp,
            kind,
            level: f[DESC_LEVEL_OFFSET],
            codec,
            offset: get_u32(f, DESC_OFFSET_OFFSET),
            stored_len: get_u32(f, DESC_STORED_LEN_OFFSET),
            raw_len: get_u32(f, DESC_RAW_LEN_OFFSET),
        };
        if u64::from(d.offset) + u64::from(d.stored_len) > data_len {
            return Err(bad(format!(
                "payload {}+{} lies outside the {data_len}-byte data section",
                d.offset, d.stored_len
            )));
        }
        if d.codec == CompressionCodec::None && d.stored_len != d.raw_len {
            return Err(bad(format!(
                "uncompressed payload of {} bytes but raw length {}",
                d.stored_len, d.raw_len
            )));
        }
        out.push(d);
    }
    Ok(out)
}

/// The metadata section listing `descriptors` (count, then each
/// descriptor), appended to `out`: the bytes a container file holds
/// between its data and its trailer. The simulator keeps its containers'
/// metadata this way on disk (`MetaOnlyStore`).
pub fn encode_metadata(descriptors: &[Descriptor], out: &mut Vec<u8>) {
    out.reserve(
        META_COUNT_LEN
            + descriptors.len()
                * descriptors
                    .first()
                    .map_or(0, |d| descriptor_len(d.fp.len())),
    );
    crate::bytes::put_u32(out, descriptors.len() as u32);
    for d in descriptors {
        writer::encode_descriptor(d, out);
    }
}

/// Decodes a metadata section written by [`encode_metadata`], checked as
/// a container's is (`what` names it in errors): `count` descriptors of
/// `fp_width`-byte fingerprints, every payload inside `data_len`.
pub fn decode_metadata(
    what: &str,
    meta: &[u8],
    count: u32,
    fp_width: usize,
    data_len: u64,
) -> Result<Vec<Descriptor>> {
    if meta.len() != metadata_len(count as usize, fp_width) {
        return Err(Error::corrupt(
            what,
            format!(
                "metadata section of {} bytes, {count} descriptors need {}",
                meta.len(),
                metadata_len(count as usize, fp_width)
            ),
        ));
    }
    decode_descriptors(what, meta, 0, count, fp_width, data_len)
}

/// Decodes and verifies a whole container: header, trailer, metadata and
/// data checksums, descriptor bounds, and that header and trailer agree.
pub fn decode_container(bytes: &[u8]) -> Result<ContainerMeta> {
    const WHAT: &str = "container";
    if bytes.len() < CONTAINER_HEADER_LEN {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "truncated at offset {}: shorter than the {CONTAINER_HEADER_LEN}-byte header",
                bytes.len()
            ),
        ));
    }
    let h = &bytes[..CONTAINER_HEADER_LEN];
    let magic = &h[HDR_MAGIC_OFFSET..HDR_MAGIC_OFFSET + HDR_MAGIC_LEN];
    if magic != CONTAINER_MAGIC {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "bad magic \"{}\" (expected \"{}\")",
                show_magic(magic),
                show_magic(&CONTAINER_MAGIC)
            ),
        ));
    }
    check_version(WHAT, get_u32(h, HDR_VERSION_OFFSET))?;
    let stored = get_u32(h, HDR_CRC_OFFSET);
    let actual = crc32c::crc32c(&h[..HDR_CRC_OFFSET]);
    if stored != actual {
        return Err(Error::corrupt(
            WHAT,
            format!("header checksum mismatch: stored {stored:08x}, computed {actual:08x}"),
        ));
    }
    let id = ContainerId(get_u64(h, HDR_ID_OFFSET));
    let what = what_for(id);
    if h[HDR_RESERVED1_OFFSET..HDR_RESERVED1_OFFSET + HDR_RESERVED1_LEN] != [0; HDR_RESERVED1_LEN]
        || h[HDR_RESERVED2_OFFSET..HDR_RESERVED2_OFFSET + HDR_RESERVED2_LEN]
            != [0; HDR_RESERVED2_LEN]
    {
        return Err(Error::corrupt(&what, "header reserved bytes are not zero"));
    }
    let fp_width = h[HDR_FP_WIDTH_OFFSET] as usize;
    check_fp_width(&what, fp_width)?;
    let meta = match decode_tail(bytes.len() as u64, bytes)? {
        TailDecode::Meta(m) => m,
        TailDecode::NeedTail(n) => {
            return Err(Error::corrupt(
                &what,
                format!("tail needs {n} bytes of a {}-byte file", bytes.len()),
            ))
        }
    };
    if meta.id != id {
        return Err(Error::corrupt(
            &what,
            format!("header id {id} but trailer id {}", meta.id),
        ));
    }
    if meta.fp_width != fp_width {
        return Err(Error::corrupt(
            &what,
            format!(
                "header fingerprint width {fp_width} but trailer {}",
                meta.fp_width
            ),
        ));
    }
    let data = &bytes[CONTAINER_HEADER_LEN..CONTAINER_HEADER_LEN + meta.data_len as usize];
    let actual = crc32c::crc32c(data);
    if actual != meta.data_crc {
        return Err(Error::corrupt(
            &what,
            format!(
                "data checksum mismatch: stored {:08x}, computed {actual:08x}",
                meta.data_crc
            ),
        ));
    }
    Ok(meta)
}

/// The stored (maybe compressed) payload of `d` within the container bytes.
/// `container` is the whole file, or at least its first
/// `chunk_file_range(meta, d).end` bytes.
pub fn stored_chunk<'a>(
    container: &'a [u8],
    meta: &ContainerMeta,
    d: &Descriptor,
) -> Result<&'a [u8]> {
    let r = chunk_file_range(meta, d);
    let in_data = u64::from(d.offset) + u64::from(d.stored_len) <= meta.data_len;
    if !in_data || r.end > container.len() as u64 {
        return Err(Error::corrupt(
            what_for(meta.id),
            format!(
                "chunk {} at file bytes {}..{} lies outside the data section ({} bytes) or the {} bytes given",
                d.fp,
                r.start,
                r.end,
                meta.data_len,
                container.len()
            ),
        ));
    }
    Ok(&container[r.start as usize..r.end as usize])
}

mod writer;

pub use writer::ContainerWriter;

#[cfg(test)]
mod tests;
