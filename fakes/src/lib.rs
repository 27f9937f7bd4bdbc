//! Fakes.
pub mod llm_server;
