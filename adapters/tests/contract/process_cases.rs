//! Contract cases of the process adapter: its `Rig` and its `contract_rig!` row (owned by the
//! `process` helper; see the top of main.rs for the API).
