//! What commands print about their outcome, kept apart from the commands
//! that parse options and run the engine: one file per report.

pub mod backup;
pub mod restore;
pub mod stats;
