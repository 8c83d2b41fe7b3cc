//! [`ContainerWriter`]: packs one stream's chunks into a container (SISL,
//! DDFS `001_3652cceaf162c5a1.txt` §4.2) and encodes header, metadata and
//! trailer as laid out in the parent module.

use cairn_core::{ChunkKind, CompressionCodec, ContainerId, Fingerprint};

use super::*;
use crate::bytes::{put_u32, set_u32, set_u64};

/// Accumulates chunks of one stream into one container (SISL, DDFS §4.2).
///
/// The data section is built in place behind a reserved header, so
/// [`ContainerWriter::finish_into`] appends metadata and trailer and hands the
/// buffer over without copying payloads.
///
/// **Metadata chunks last.** Recipe tree nodes and directory listings
/// (every chunk but level-0 data) are kept apart and laid at the *end* of
/// the data section, in stream order, just before the metadata section:
/// the one tail read that fetches a container's descriptors (DDFS §4.3)
/// then usually holds its metadata chunks too, so a reader that keeps the
/// tail (the local metadata cache of a remote repository) walks recipes
/// without another request. Data chunks keep stream order among
/// themselves (SISL); descriptors are listed in data-section order.
#[derive(Debug)]
pub struct ContainerWriter {
    id: ContainerId,
    fp_width: usize,
    capacity: usize,
    /// Reserved header followed by the data chunks' payloads so far.
    buf: Vec<u8>,
    /// Descriptors of the data chunks (offsets final).
    descriptors: Vec<Descriptor>,
    /// Payloads of the metadata chunks, laid after the data chunks when
    /// the container is finished.
    meta_buf: Vec<u8>,
    /// Their descriptors, offsets relative to `meta_buf`.
    meta_descriptors: Vec<Descriptor>,
    /// Logical bytes of chunks recorded without their payload
    /// ([`ContainerWriter::push_absent`]): a simulated container that is
    /// described, never encoded.
    absent: usize,
}

impl ContainerWriter {
    /// A new empty container. `capacity` is the target size of the encoded
    /// container in bytes (e.g. 4 MiB).
    ///
    /// Panics if `fp_width` is not in 1..=32 (widths come from validated
    /// configuration).
    pub fn new(id: ContainerId, fp_width: usize, capacity: usize) -> Self {
        assert!(
            (1..=cairn_core::MAX_FINGERPRINT_LEN).contains(&fp_width),
            "fingerprint width {fp_width} out of range"
        );
        // The data section's room is reserved at the first stored payload
        // (`push`), not here: a container of absent chunks (a trace's)
        // never needs it, and reserving it per container cost the
        // simulator a fresh zeroed huge page each time.
        let buf = vec![0; CONTAINER_HEADER_LEN];
        ContainerWriter {
            id,
            fp_width,
            capacity,
            buf,
            descriptors: Vec::new(),
            meta_buf: Vec::new(),
            meta_descriptors: Vec::new(),
            absent: 0,
        }
    }

    /// Whether a chunk is laid among the metadata chunks at the end.
    fn laid_last(kind: ChunkKind, level: u8) -> bool {
        kind != ChunkKind::Data || level > 0
    }

    /// Bytes of data-chunk payloads (stored and absent).
    fn data_chunks_len(&self) -> usize {
        self.buf.len() - CONTAINER_HEADER_LEN + self.absent
    }

    /// True if a chunk of `stored_len` stored bytes keeps the encoded
    /// container within its capacity (and the data section within `u32`
    /// offsets). Always true when empty: an oversize chunk gets a container
    /// of its own.
    pub fn would_fit(&self, stored_len: usize) -> bool {
        if self.is_empty() {
            return true;
        }
        let data = self.data_len().saturating_add(stored_len);
        data <= u32::MAX as usize
            && encoded_len(self.len() + 1, data, self.fp_width) <= self.capacity
    }

    /// Appends a chunk's stored payload and its descriptor.
    ///
    /// Panics if `fp` is not `fp_width` bytes wide or the data section would
    /// pass 4 GiB (offsets are `u32`); both are caller bugs.
    pub fn push(
        &mut self,
        fp: Fingerprint,
        kind: ChunkKind,
        level: u8,
        codec: CompressionCodec,
        raw_len: u32,
        stored: &[u8],
    ) {
        assert_eq!(fp.len(), self.fp_width, "fingerprint width mismatch");
        assert!(
            self.data_len() + stored.len() <= u32::MAX as usize,
            "container data section exceeds 4 GiB"
        );
        debug_assert!(
            codec != CompressionCodec::None || raw_len as usize == stored.len(),
            "uncompressed chunk with raw_len != stored length"
        );
        let (buf, descriptors, offset) = if Self::laid_last(kind, level) {
            let at = self.meta_buf.len();
            (&mut self.meta_buf, &mut self.meta_descriptors, at)
        } else {
            if self.buf.capacity() < self.buf.len() + stored.len() {
                // One allocation of the whole container, as it fills.
                let room = self.capacity.clamp(CONTAINER_HEADER_LEN, 64 << 20);
                self.buf
                    .reserve_exact(room.saturating_sub(self.buf.len()).max(stored.len()));
            }
            let at = self.data_chunks_len();
            (&mut self.buf, &mut self.descriptors, at)
        };
        buf.extend_from_slice(stored);
        descriptors.push(Descriptor {
            fp,
            kind,
            level,
            codec,
            offset: offset as u32,
            stored_len: stored.len() as u32,
            raw_len,
        });
    }

    /// Records a chunk whose payload is not at hand (a chunk trace knows only
    /// its sizes): the data section grows by `stored_len` logical bytes,
    /// laid among the data chunks whatever its kind (a trace's chunks are
    /// data). Such a container can only be described
    /// ([`into_meta`](Self::into_meta)), never encoded.
    pub fn push_absent(
        &mut self,
        fp: Fingerprint,
        kind: ChunkKind,
        level: u8,
        codec: CompressionCodec,
        raw_len: u32,
        stored_len: u32,
    ) {
        assert_eq!(fp.len(), self.fp_width, "fingerprint width mismatch");
        assert!(
            self.data_len() + stored_len as usize <= u32::MAX as usize,
            "container data section exceeds 4 GiB"
        );
        let offset = self.data_chunks_len();
        self.absent += stored_len as usize;
        self.descriptors.push(Descriptor {
            fp,
            kind,
            level,
            codec,
            offset: offset as u32,
            stored_len,
            raw_len,
        });
    }

    /// Whether some chunk was recorded without its payload.
    pub fn is_sparse(&self) -> bool {
        self.absent > 0
    }

    /// The metadata a reader of the finished container would decode, without
    /// encoding it: what a metadata-only container store keeps. `file_size`
    /// is the size the encoded container would have.
    pub fn into_meta(self) -> ContainerMeta {
        ContainerMeta {
            id: self.id,
            fp_width: self.fp_width,
            data_offset: CONTAINER_HEADER_LEN as u64,
            data_len: self.data_len() as u64,
            data_crc: 0,
            file_size: self.encoded_len() as u64,
            descriptors: self.descriptors(),
        }
    }

    pub fn id(&self) -> ContainerId {
        self.id
    }

    pub fn fp_width(&self) -> usize {
        self.fp_width
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.descriptors.len() + self.meta_descriptors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes in the data section so far.
    pub fn data_len(&self) -> usize {
        self.data_chunks_len() + self.meta_buf.len()
    }

    /// Size the container would have if finished now.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.len(), self.data_len(), self.fp_width)
    }

    /// The descriptors as the finished container lists them: data chunks,
    /// then metadata chunks, each at its final offset.
    pub fn descriptors(&self) -> Vec<Descriptor> {
        let shift = self.data_chunks_len() as u32;
        let last = self.meta_descriptors.iter().map(|d| Descriptor {
            offset: d.offset + shift,
            ..*d
        });
        self.descriptors.iter().copied().chain(last).collect()
    }

    /// Starts over as an empty container with a new id.
    pub fn reset(&mut self, id: ContainerId) {
        self.id = id;
        self.buf.truncate(CONTAINER_HEADER_LEN);
        self.descriptors.clear();
        self.meta_buf.clear();
        self.meta_descriptors.clear();
        self.absent = 0;
    }

    /// The complete container bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_into(&mut out);
        out
    }

    /// Replaces `out` with the complete container bytes (swapping buffers,
    /// no copy) and leaves the writer empty, **with the same id**: call
    /// [`ContainerWriter::reset`] with the next id before pushing again.
    /// `out`'s old allocation becomes the writer's next buffer.
    ///
    /// Panics if the container is sparse ([`push_absent`](Self::push_absent)):
    /// there are no payload bytes to encode.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        assert!(!self.is_sparse(), "a sparse container cannot be encoded");
        let w = self.fp_width;
        let descriptors = self.descriptors();
        self.buf.extend_from_slice(&self.meta_buf);
        let buf = &mut self.buf;
        let header = &mut buf[..CONTAINER_HEADER_LEN];
        header.fill(0);
        header[HDR_MAGIC_OFFSET..HDR_MAGIC_OFFSET + HDR_MAGIC_LEN]
            .copy_from_slice(&CONTAINER_MAGIC);
        set_u32(header, HDR_VERSION_OFFSET, CONTAINER_VERSION);
        header[HDR_FP_WIDTH_OFFSET] = w as u8;
        set_u64(header, HDR_ID_OFFSET, self.id.0);
        let hcrc = crc32c::crc32c(&header[..HDR_CRC_OFFSET]);
        set_u32(header, HDR_CRC_OFFSET, hcrc);

        let data_len = buf.len() - CONTAINER_HEADER_LEN;
        let data_crc = crc32c::crc32c(&buf[CONTAINER_HEADER_LEN..]);
        let meta_offset = buf.len();
        buf.reserve(metadata_len(descriptors.len(), w) + CONTAINER_TRAILER_LEN);
        put_u32(buf, descriptors.len() as u32);
        for d in &descriptors {
            encode_descriptor(d, buf);
        }
        let meta_len = buf.len() - meta_offset;
        let meta_crc = crc32c::crc32c(&buf[meta_offset..]);

        let mut t = [0u8; CONTAINER_TRAILER_LEN];
        set_u64(&mut t, TR_ID_OFFSET, self.id.0);
        set_u64(&mut t, TR_DATA_OFFSET_OFFSET, CONTAINER_HEADER_LEN as u64);
        set_u64(&mut t, TR_DATA_LEN_OFFSET, data_len as u64);
        set_u64(&mut t, TR_META_OFFSET_OFFSET, meta_offset as u64);
        set_u64(&mut t, TR_META_LEN_OFFSET, meta_len as u64);
        set_u32(&mut t, TR_COUNT_OFFSET, descriptors.len() as u32);
        set_u32(&mut t, TR_DATA_CRC_OFFSET, data_crc);
        set_u32(&mut t, TR_META_CRC_OFFSET, meta_crc);
        t[TR_FP_WIDTH_OFFSET] = w as u8;
        set_u32(&mut t, TR_VERSION_OFFSET, CONTAINER_VERSION);
        t[TR_MAGIC_OFFSET..TR_MAGIC_OFFSET + TR_MAGIC_LEN]
            .copy_from_slice(&CONTAINER_TRAILER_MAGIC);
        let tcrc = crc32c::crc32c(&t[..TR_CRC_OFFSET]);
        set_u32(&mut t, TR_CRC_OFFSET, tcrc);
        buf.extend_from_slice(&t);

        std::mem::swap(buf, out);
        self.buf.clear();
        self.buf.resize(CONTAINER_HEADER_LEN, 0);
        self.descriptors.clear();
        self.meta_buf.clear();
        self.meta_descriptors.clear();
    }
}

pub(super) fn encode_descriptor(d: &Descriptor, out: &mut Vec<u8>) {
    out.extend_from_slice(d.fp.as_bytes());
    out.push(d.kind as u8);
    out.push(d.level);
    out.push(d.codec as u8);
    put_u32(out, d.offset);
    put_u32(out, d.stored_len);
    put_u32(out, d.raw_len);
}
