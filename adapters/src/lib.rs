//! The adapter contract of advisord and its transports.
//!
//! An adapter is only transport: it turns a prompt into an answer text or a typed
//! failure. [`contract::consult`] wraps every adapter the same way: it owns the deadline,
//! the cancellation and the normalisation of the answer into the consultation's fields.

pub mod contract;
pub mod environment;
pub mod http;
pub mod mesh;
pub mod normalise;
pub mod process;
pub mod question;
pub mod registry;
