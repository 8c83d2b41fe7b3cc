//! cairn-sim: the simulation harness. Trace readers (`trace`), synthetic
//! workloads (`workload`) and the device model (`device`) feed and measure
//! the same engine the real backups use; nothing here forks the engine.
//! `analyze` is the dataset study of `004_62bf1a5ddd5ed253.txt`; `writers`
//! replays many writers sharing one repository (`sim --writers`).

pub mod analyze;
pub mod device;
pub mod experiment;
mod figure;
pub mod partition;
mod scratch;
pub mod sim;
pub mod trace;
pub mod workload;
pub mod writers;
