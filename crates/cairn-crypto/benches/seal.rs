//! Throughput of sealing and opening objects of 8 KiB (a typical chunk) and
//! 1 MiB with both algorithms.

use cairn_crypto::{Algorithm, MasterKey, ObjectCipher};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn seal_open(c: &mut Criterion) {
    let master = MasterKey::from_bytes([0x42; 32]);
    for size in [8 << 10, 1 << 20] {
        let plain: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let ad = [1u8; 33];
        let mut group = c.benchmark_group(format!("{} KiB", size >> 10));
        group.throughput(Throughput::Bytes(size as u64));
        for alg in Algorithm::ALL {
            let cipher = ObjectCipher::new(&master, alg);
            let mut out = Vec::with_capacity(size + cipher.overhead());
            group.bench_function(BenchmarkId::new("seal", alg), |b| {
                b.iter(|| {
                    out.clear();
                    cipher.seal(&ad, &plain, &mut out).unwrap();
                })
            });
            let mut sealed = Vec::new();
            cipher.seal(&ad, &plain, &mut sealed).unwrap();
            group.bench_function(BenchmarkId::new("open", alg), |b| {
                b.iter(|| {
                    out.clear();
                    cipher.open(&ad, &sealed, &mut out).unwrap();
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, seal_open);
criterion_main!(benches);
