//! The columns of `ls`'s long listing that depend on an entry's kind, as
//! `ls -l` prints them: the size of a file, or a device's major and minor
//! numbers (`8, 1`) where the size goes. The type letter of the mode
//! column is [`crate::output::mode_string`].

use cairn_format::dir::DirEntry;

/// Major and minor numbers of a Linux `dev_t` (glibc's encoding: 12 bits of
/// major and 20 of minor, split across the word).
pub fn major_minor(rdev: u64) -> (u64, u64) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0x00ff);
    (major, minor)
}

/// The size column: `major, minor` for a device (its recorded number),
/// the size in bytes otherwise.
pub fn size_column(e: &DirEntry) -> String {
    match (e.kind.is_device(), e.extras.rdev) {
        (true, Some(rdev)) => {
            let (major, minor) = major_minor(rdev);
            format!("{major}, {minor}")
        }
        _ => e.size.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_split_as_glibc_makedev() {
        // makedev(8, 1) (sda1), makedev(1, 3) (/dev/null), and one with
        // the high bits of both in use: makedev(0x1234, 0x56789).
        assert_eq!(major_minor(0x801), (8, 1));
        assert_eq!(major_minor(0x103), (1, 3));
        let dev = (0x1234u64 & 0xfff) << 8
            | (0x1234u64 & !0xfff) << 32
            | (0x56789u64 & 0xff)
            | (0x56789u64 & !0xff) << 12;
        assert_eq!(major_minor(dev), (0x1234, 0x56789));
    }
}
