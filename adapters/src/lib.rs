//! The adapter contract.
