//! advisord: consult independent advisors concurrently, under one deadline, and keep a
//! typed record of every outcome. See `docs/ARCHITECTURE.md` for the map.

pub mod check;
pub mod cli;
pub mod client;
pub mod context;
pub mod core;
pub mod daemon;
pub mod error;
pub mod facade;
pub mod follow;
pub mod init;
pub mod invariants;
pub mod journal;
pub mod machine;
pub mod mcp;
pub mod ownership;
pub mod paths;
pub mod pins;
pub mod planning;
pub mod protocol;
pub mod render;
pub mod service;
pub mod store;
pub mod trust;
pub mod worktree;
