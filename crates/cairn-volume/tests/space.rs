//! `statfs` on a mounted volume: used space is logical (what the files
//! would take unoptimized), free space is the backing file system's.

mod fuse_support;
mod support;

use std::sync::Arc;

use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::space::VolumeSpace;
use cairn_volume::{optimize, OptimizeOptions};
use fuse_support::{fuse_missing, skip_or_fail};
use rand::{Rng, SeedableRng};

#[test]
fn df_on_the_mount_shows_the_saving_as_logical_use() {
    if let Some(why) = fuse_missing() {
        skip_or_fail(&format!("FUSE unavailable: {why}"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let vol = support::create(&dir);
    let files = vol.dir().files();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let data: Vec<u8> = (0..4 << 20).map(|_| rng.gen()).collect();
    for i in 0..4 {
        std::fs::write(files.join(format!("copy{i}")), &data).unwrap();
    }
    support::age(&files);
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(report.files_optimized, 4);
    let space = Arc::new(VolumeSpace::new(&vol));
    let saved = space.saved_bytes().unwrap();
    // Four copies in 16 MiB of files, one copy's chunks in the store.
    assert!(saved > 11 << 20 && saved < 12 << 20, "saved {saved}");
    let handle = mount(
        &files,
        &mnt,
        vol.content().unwrap(),
        vol.locks().clone(),
        MountOptions {
            space: space.clone(),
            ..MountOptions::default()
        },
    )
    .expect("mounting");
    let on_mount = rustix::fs::statvfs(&mnt).unwrap();
    let backing = rustix::fs::statvfs(&files).unwrap();
    let extra = (on_mount.f_blocks - backing.f_blocks) * on_mount.f_frsize;
    assert!(
        extra + on_mount.f_frsize > saved && extra <= saved,
        "the mount's size exceeds the backing file system's by {extra}, saved {saved}"
    );
    // Free space is the backing file system's (other writers may move it
    // a little between the two calls).
    let diff = on_mount.f_bavail.abs_diff(backing.f_bavail) * on_mount.f_frsize;
    assert!(diff < 64 << 20, "free space differs by {diff}");
    handle.unmount().unwrap();
}
