//! Runs the conformance suite against every backend in this crate.

mod common;

use cairn_backend::{
    conformance, CountingBackend, FaultBackend, FaultPlan, LocalBackend, MemBackend,
};
use cairn_core::{Backend, Counters};
use common::TempDir;
use std::sync::{Arc, Mutex};

#[test]
fn local_backend() {
    // Keep every temp dir alive until the suite ends.
    let dirs = Mutex::new(Vec::new());
    conformance::run_all(&|| {
        let dir = TempDir::new();
        let b = LocalBackend::create(&dir.path().join("repo")).unwrap();
        dirs.lock().unwrap().push(dir);
        Box::new(b) as Box<dyn Backend>
    });
}

#[test]
fn local_scratch_backend() {
    let dirs = Mutex::new(Vec::new());
    conformance::run_all(&|| {
        let dir = TempDir::new();
        let b = LocalBackend::scratch(&dir.path().join("scratch")).unwrap();
        dirs.lock().unwrap().push(dir);
        Box::new(b) as Box<dyn Backend>
    });
}

#[test]
fn mem_backend() {
    conformance::run_all(&|| Box::new(MemBackend::new()));
}

#[test]
fn counting_backend() {
    conformance::run_all(&|| {
        Box::new(CountingBackend::new(
            MemBackend::new(),
            Arc::new(Counters::default()),
        ))
    });
}

#[test]
fn fault_backend_with_empty_plan() {
    conformance::run_all(&|| Box::new(FaultBackend::new(MemBackend::new(), FaultPlan::new())));
}

#[test]
fn counting_fault_local_stack() {
    let dirs = Mutex::new(Vec::new());
    conformance::run_all(&|| {
        let dir = TempDir::new();
        let local = LocalBackend::create(dir.path()).unwrap();
        dirs.lock().unwrap().push(dir);
        let faulty = FaultBackend::new(local, FaultPlan::new());
        Box::new(CountingBackend::new(faulty, Arc::new(Counters::default())))
    });
}
