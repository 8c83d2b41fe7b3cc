//! Random bytes from the operating system (getrandom), as a cairn `Result`.
//!
//! Every nonce, salt, key file id and master key comes from here; there is no
//! user-space generator whose state a `fork` could duplicate.

use cairn_core::{Error, Result};

pub(crate) fn fill(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| {
        Error::io(
            "reading random bytes from the operating system",
            std::io::Error::other(e.to_string()),
        )
    })
}

pub(crate) fn array<const N: usize>() -> Result<[u8; N]> {
    let mut out = [0u8; N];
    fill(&mut out)?;
    Ok(out)
}
