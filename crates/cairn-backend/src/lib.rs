//! storage backends: local filesystem, in-memory, fault injection
