//! Contract cases of the http adapter: its `Rig` and its `contract_rig!` row (owned by the
//! `http` helper; see the top of main.rs for the API).
