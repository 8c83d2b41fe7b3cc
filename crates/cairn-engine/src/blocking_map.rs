//! Running a blocking function over many items on a few threads of their
//! own: requests to a store that waits on the network, where throughput
//! comes from requests in flight rather than from cores (rayon's pool has
//! one thread per core and is for CPU work).

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, in the items' order, computed by up to `threads`
/// threads at once (on the caller's thread alone when that is 1).
pub fn blocking_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return done;
                        };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a blocking_map worker panicked"))
            .collect()
    });
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// [`blocking_map`] a window of `threads` items at a time, each result
/// handed to `each` in the items' order: at most one window of results is
/// held at once (index deltas can be large). Stops at `each`'s first error.
pub fn blocking_for_each<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
    mut each: impl FnMut(&T, R) -> cairn_core::Result<()>,
) -> cairn_core::Result<()> {
    let window = threads.max(1);
    for batch in items.chunks(window) {
        for (item, r) in batch.iter().zip(blocking_map(batch, window, &f)) {
            each(item, r)?;
        }
    }
    Ok(())
}

/// What a scoped thread returned; its panic goes on in the caller.
pub(crate) fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn keeps_order_and_overlaps_up_to_the_bound() {
        let items: Vec<u32> = (0..40).collect();
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let out = blocking_map(&items, 4, |&x| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            // The first calls wait (bounded) for a second one to overlap.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while x < 2 && peak.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            now.fetch_sub(1, Ordering::SeqCst);
            x * 2
        });
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        let peak = peak.load(Ordering::SeqCst);
        assert!((2..=4).contains(&peak), "peak {peak}");
        assert!(blocking_map(&[] as &[u32], 8, |&x| x).is_empty());
        assert_eq!(blocking_map(&[1, 2], 1, |&x| x + 1), vec![2, 3]);
    }

    #[test]
    fn for_each_hands_results_in_order_and_stops_at_an_error() {
        let items: Vec<u32> = (0..10).collect();
        let mut seen = Vec::new();
        blocking_for_each(
            &items,
            3,
            |&x| x * 2,
            |&x, r| {
                seen.push((x, r));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, items.iter().map(|&x| (x, x * 2)).collect::<Vec<_>>());
        let mut handed = 0;
        let err = blocking_for_each(
            &items,
            3,
            |&x| x,
            |_, r| {
                handed += 1;
                if r == 4 {
                    return Err(cairn_core::Error::invalid("stop"));
                }
                Ok(())
            },
        );
        assert!(err.is_err());
        assert_eq!(handed, 5);
    }
}
