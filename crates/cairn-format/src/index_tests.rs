use super::*;
use proptest::prelude::*;

fn header(w: usize, page_size: usize, pages: u64, entries: u64) -> IndexHeader {
    IndexHeader {
        fp_width: w,
        page_size,
        page_count: pages,
        entry_count: entries,
        covered_below: ContainerId(99),
    }
}

/// `n` well-spread fingerprints (xorshift), in index entry order.
fn entries(w: usize, n: usize) -> Vec<IndexEntry> {
    let mut s = 0x243f6a8885a308d3u64;
    let mut v: Vec<IndexEntry> = (0..n)
        .map(|i| {
            let bytes: Vec<u8> = (0..w)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect();
            IndexEntry {
                fp: Fingerprint::from_slice(&bytes),
                container: ContainerId(i as u64 / 3),
            }
        })
        .collect();
    v.sort_by_key(|a| entry_order(&a.fp));
    v.dedup_by(|a, b| a.fp == b.fp);
    v
}

fn decode_all(bytes: &[u8]) -> Vec<IndexEntry> {
    let h = decode_index_header(bytes).unwrap();
    assert_eq!(bytes.len() as u64, index_file_len(&h));
    let mut all = Vec::new();
    for p in 0..h.page_count {
        let off = index_page_offset(&h, p) as usize;
        all.extend(decode_index_page(&bytes[off..off + h.page_size], &h, p).unwrap());
    }
    all
}

#[test]
fn page_of_is_monotone_and_in_range() {
    let e = entries(32, 500);
    for pages in [1u64, 2, 7, 1000, u64::MAX] {
        let mut last = 0;
        for x in &e {
            let p = page_of(&x.fp, pages);
            assert!(p < pages && p >= last);
            last = p;
        }
    }
    assert_eq!(page_of(&Fingerprint::from_slice(&[0xff; 32]), 0), 0);
}

/// Fingerprints that share their first 8 (or 24) bytes still spread over
/// the pages: the page key hashes every byte.
#[test]
fn shared_prefixes_spread_over_pages() {
    for shared in [8usize, 24] {
        let pages = 64u64;
        let mut hits = vec![0u32; pages as usize];
        for i in 0..6400u64 {
            let mut b = [0xabu8; 32];
            b[shared..shared + 8].copy_from_slice(&i.to_le_bytes());
            hits[page_of(&Fingerprint::from_slice(&b), pages) as usize] += 1;
        }
        let max = *hits.iter().max().unwrap();
        assert!(
            max < 200,
            "shared {shared}: a page got {max} of 6400 (expected ~100)"
        );
    }
}

#[test]
fn round_trip_and_lookup() {
    let e = entries(20, 300);
    let per = entries_per_page(512, 20);
    assert_eq!(per, (512 - 16) / 28);
    let pages = suggested_page_count(e.len() as u64, 512, 20);
    let h = header(20, 512, pages, e.len() as u64);
    let bytes = encode_index(&h, &e).unwrap();
    assert_eq!(decode_index_header(&bytes[..INDEX_HEADER_LEN]).unwrap(), h);
    assert_eq!(decode_all(&bytes), e);
    for x in &e {
        let p = page_of(&x.fp, h.page_count);
        let off = index_page_offset(&h, p) as usize;
        let page = &bytes[off..off + h.page_size];
        assert_eq!(
            lookup_in_page(page, &h, p, &x.fp).unwrap(),
            Some(x.container)
        );
        let mut other = x.fp.as_bytes().to_vec();
        other[19] ^= 1;
        let o = Fingerprint::from_slice(&other);
        if e.binary_search_by(|y| y.fp.cmp(&o)).is_err() {
            assert_eq!(lookup_in_page(page, &h, p, &o).unwrap(), None);
        }
    }
}

#[test]
fn empty_index() {
    let h = header(32, 4096, 1, 0);
    let bytes = encode_index(&h, &[]).unwrap();
    assert_eq!(bytes.len(), 8192);
    assert!(decode_all(&bytes).is_empty());
}

#[test]
fn overflow_and_invalid_input() {
    let e = entries(32, 100);
    let h = header(32, 256, 1, 100);
    let err = encode_index(&h, &e).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(
        err.to_string().contains("overflows") || err.to_string().contains("capacity"),
        "{err}"
    );
    // Unsorted, duplicated, wrong width, wrong count, bad header values.
    let good = header(32, 4096, 4, 100);
    let mut rev = e.clone();
    rev.reverse();
    assert!(encode_index(&good, &rev).is_err());
    let mut dup = e.clone();
    dup[1] = dup[0];
    assert!(encode_index(&good, &dup).is_err());
    assert!(encode_index(&header(31, 4096, 4, 100), &e).is_err());
    assert!(encode_index(&header(32, 4096, 4, 99), &e).is_err());
    assert!(encode_index(&header(32, 4096, 0, 0), &[]).is_err());
    assert!(encode_index(&header(32, 100, 1, 0), &[]).is_err());
    assert!(encode_index(&header(0, 4096, 1, 0), &[]).is_err());
    assert!(encode_index(&header(32, 4096, u64::MAX, 0), &[]).is_err());
}

#[test]
fn header_errors() {
    let h = header(8, 256, 3, 0);
    let bytes = encode_index(&h, &[]).unwrap();
    for cut in 0..INDEX_HEADER_LEN {
        assert!(decode_index_header(&bytes[..cut])
            .unwrap_err()
            .is_corruption());
    }
    for i in 0..INDEX_HEADER_LEN * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        assert!(decode_index_header(&b).is_err(), "flip {i}");
    }
    let reseal = |b: &mut Vec<u8>| {
        let c = crc32c::crc32c(&b[..H_CRC_OFFSET]);
        set_u32(b, H_CRC_OFFSET, c);
    };
    let mut b = bytes.clone();
    set_u32(&mut b, H_VERSION_OFFSET, INDEX_VERSION + 1);
    reseal(&mut b);
    assert!(matches!(
        decode_index_header(&b),
        Err(Error::UnsupportedVersion { found, .. }) if found == INDEX_VERSION + 1
    ));
    for (off, v) in [
        (H_PAGE_SIZE_OFFSET, 8u64),
        (H_PAGE_COUNT_OFFSET, 0),
        (H_ENTRY_COUNT_OFFSET, 1 << 40),
    ] {
        let mut b = bytes.clone();
        if off == H_PAGE_SIZE_OFFSET {
            set_u32(&mut b, off, v as u32);
        } else {
            set_u64(&mut b, off, v);
        }
        reseal(&mut b);
        assert!(
            decode_index_header(&b).unwrap_err().is_corruption(),
            "field at {off}"
        );
    }
    let mut b = bytes.clone();
    b[H_FP_WIDTH_OFFSET] = 33;
    reseal(&mut b);
    assert!(decode_index_header(&b).unwrap_err().is_corruption());
    let mut b = bytes.clone();
    b[H_RESERVED1_OFFSET] = 1;
    reseal(&mut b);
    assert!(decode_index_header(&b)
        .unwrap_err()
        .to_string()
        .contains("reserved"));
}

#[test]
fn page_errors() {
    let e = entries(8, 40);
    let h = header(8, 256, 4, e.len() as u64);
    let bytes = encode_index(&h, &e).unwrap();
    let page = |p: u64| {
        let off = index_page_offset(&h, p) as usize;
        bytes[off..off + h.page_size].to_vec()
    };
    let p1 = page(1);
    // Truncation, a wrong page number, a misplaced page, every bit flip.
    for cut in 0..p1.len() {
        assert!(decode_index_page(&p1[..cut], &h, 1)
            .unwrap_err()
            .is_corruption());
    }
    assert!(decode_index_page(&p1, &h, 4).is_err());
    let e2 = decode_index_page(&p1, &h, 2).unwrap_err().to_string();
    assert!(e2.contains("page says it is page 1"), "{e2}");
    for i in 0..p1.len() * 8 {
        let mut b = p1.clone();
        b[i / 8] ^= 1 << (i % 8);
        assert!(decode_index_page(&b, &h, 1).is_err(), "flip {i}");
        assert!(lookup_in_page(&b, &h, 1, &e[0].fp).is_err());
    }
    // Structural errors behind a valid checksum.
    let reseal = |b: &mut Vec<u8>| {
        let at = b.len() - 4;
        let c = crc32c::crc32c(&b[..at]);
        set_u32(b, at, c);
    };
    let mut b = p1.clone();
    set_u32(&mut b, P_COUNT_OFFSET, 1000);
    reseal(&mut b);
    assert!(decode_index_page(&b, &h, 1)
        .unwrap_err()
        .to_string()
        .contains("capacity"));
    let mut b = p1.clone();
    let n = get_u32(&b, P_COUNT_OFFSET) as usize;
    assert!(n >= 2);
    b[P_ENTRIES_OFFSET] = 0; // first entry now belongs to page 0
    reseal(&mut b);
    assert!(decode_index_page(&b, &h, 1)
        .unwrap_err()
        .to_string()
        .contains("another page"));
    let mut b = p1.clone();
    let (first, second) = (P_ENTRIES_OFFSET, P_ENTRIES_OFFSET + 16);
    let tmp: Vec<u8> = b[first..first + 16].to_vec();
    b.copy_within(second..second + 16, first);
    b[second..second + 16].copy_from_slice(&tmp);
    reseal(&mut b);
    assert!(decode_index_page(&b, &h, 1)
        .unwrap_err()
        .to_string()
        .contains("not sorted"));
}

fn index_strategy() -> impl Strategy<Value = (usize, usize, Vec<IndexEntry>)> {
    (
        1usize..=32,
        prop_oneof![Just(256usize), Just(512), Just(4096)],
    )
        .prop_flat_map(|(w, ps)| {
            proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), w), any::<u64>()),
                0..300,
            )
            .prop_map(move |raw| {
                let mut v: Vec<IndexEntry> = raw
                    .into_iter()
                    .map(|(b, c)| IndexEntry {
                        fp: Fingerprint::from_slice(&b),
                        container: ContainerId(c),
                    })
                    .collect();
                v.sort_by_key(|a| entry_order(&a.fp));
                v.dedup_by(|a, b| a.fp == b.fp);
                (w, ps, v)
            })
        })
}

/// Decodes a whole index file: the header, the file's length, then every
/// page.
fn try_decode_all(bytes: &[u8]) -> Result<(IndexHeader, Vec<IndexEntry>)> {
    let h = decode_index_header(bytes)?;
    if bytes.len() as u64 != index_file_len(&h) {
        return Err(Error::corrupt("index", "length"));
    }
    let mut all = Vec::new();
    for p in 0..h.page_count {
        let off = index_page_offset(&h, p) as usize;
        all.extend(decode_index_page(&bytes[off..off + h.page_size], &h, p)?);
    }
    Ok((h, all))
}

/// Repairs the header's checksum and, if the header then decodes, the
/// checksum of every page the bytes hold whole.
fn reseal_index(b: &mut [u8]) {
    if b.len() < INDEX_HEADER_LEN {
        return;
    }
    let c = crc32c::crc32c(&b[..H_CRC_OFFSET]);
    set_u32(b, H_CRC_OFFSET, c);
    let Ok(h) = decode_index_header(b) else {
        return;
    };
    for p in 0..h.page_count.min(1 << 16) {
        let off = index_page_offset(&h, p) as usize;
        let Some(page) = b.get_mut(off..off.saturating_add(h.page_size)) else {
            break;
        };
        let at = page.len() - 4;
        let c = crc32c::crc32c(&page[..at]);
        set_u32(page, at, c);
    }
}

/// Mutated valid index files never panic the decoders; what decodes
/// re-encodes to the same header and entries, and every entry is found by
/// a lookup.
#[test]
fn mutated_indexes_decode_canonically_or_not_at_all() {
    let valid = (
        1usize..=32,
        prop_oneof![Just(256usize), Just(512)],
        0usize..40,
        any::<u64>(),
    )
        .prop_map(|(w, ps, n, covered)| {
            let e = entries(w, n);
            let h = IndexHeader {
                fp_width: w,
                page_size: ps,
                page_count: suggested_page_count(e.len() as u64, ps, w) * 2 + 1,
                entry_count: e.len() as u64,
                covered_below: ContainerId(covered),
            };
            ((), encode_index(&h, &e).unwrap())
        });
    let run = crate::testutil::MutationRun {
        name: "index",
        cases: 256,
        min_decoded_pct: 35,
    };
    crate::testutil::check_mutations(run, valid, reseal_index, |(), bytes| {
        let Ok((h, all)) = try_decode_all(bytes) else {
            return Ok(false);
        };
        for e in &all {
            let p = page_of(&e.fp, h.page_count);
            let off = index_page_offset(&h, p) as usize;
            let page = &bytes[off..off + h.page_size];
            prop_assert_eq!(
                lookup_in_page(page, &h, p, &e.fp).unwrap(),
                Some(e.container)
            );
        }
        // The padding after the header and after a page's entries is not
        // checked, so the header and the entries are what must round-trip.
        let again = encode_index(&h, &all).unwrap();
        prop_assert_eq!(&again[..INDEX_HEADER_LEN], &bytes[..INDEX_HEADER_LEN]);
        prop_assert_eq!(try_decode_all(&again).unwrap(), (h, all));
        Ok(true)
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_round_trip((w, ps, e) in index_strategy(), covered in any::<u64>()) {
        let mut pages = suggested_page_count(e.len() as u64, ps, w);
        let bytes = loop {
            let h = IndexHeader { fp_width: w, page_size: ps, page_count: pages,
                                  entry_count: e.len() as u64, covered_below: ContainerId(covered) };
            match encode_index(&h, &e) {
                Ok(b) => break b,
                Err(Error::InvalidInput(_)) => pages = pages * 2 + 1,
                Err(other) => return Err(TestCaseError::fail(other.to_string())),
            }
        };
        prop_assert_eq!(decode_index_header(&bytes).unwrap().covered_below, ContainerId(covered));
        prop_assert_eq!(decode_all(&bytes), e);
    }

    #[test]
    fn prop_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), page_no in 0u64..4) {
        let _ = decode_index_header(&bytes);
        let h = header(8, 256, 4, 0);
        let _ = decode_index_page(&bytes, &h, page_no);
        let _ = lookup_in_page(&bytes, &h, page_no, &Fingerprint::from_slice(&[1; 8]));
        let mut page = bytes.clone();
        page.resize(256, 0);
        let at = 252;
        let c = crc32c::crc32c(&page[..at]);
        set_u32(&mut page, at, c);
        let _ = decode_index_page(&page, &h, page_no);
        let _ = lookup_in_page(&page, &h, page_no, &Fingerprint::from_slice(&[1; 8]));
    }
}
