//! What the integration tests share: running the CLI on a temporary project ([`cli`]),
//! running the real client and daemon binaries together ([`client`]), a daemon in-process
//! on a temporary socket ([`daemon`], also used by the benches), runtimes on a real NATS server ([`mesh`]), and what a run printed
//! ([`output`]).

pub mod cli;
pub mod client;
pub mod cluster;
pub mod daemon;
pub mod mesh;
pub mod output;
pub mod tcp;
