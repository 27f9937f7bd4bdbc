//! Scripted stand-ins for every advisord transport, usable by integration tests,
//! benchmarks and anyone writing an adapter: the fake advisor executable (`fake-advisor`),
//! the fake LLM HTTP server ([`llm_server`], `fake-llm-server`) and the in-process
//! [`scripted::ScriptedAdapter`], and a real NATS server for the mesh ([`nats`]).
pub mod llm_server;
pub mod nats;
pub mod scripted;
