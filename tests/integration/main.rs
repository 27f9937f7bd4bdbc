//! Every integration test of `advisord`, in one test binary (linking one binary instead of
//! one per file is most of the suite's fixed cost on two cores). Each module drives the
//! real binaries, or the daemon in-process on a temporary socket, through the one support
//! module ([`support`]).

mod support;

mod agent_hosts;
mod allocator;
mod attest;
mod cli;
mod client;
mod client_remote;
mod cockpit;
mod cockpit_pages;
mod conventions;
mod daemon;
mod daemon_signals;
mod docs_standalone;
mod downstream;
mod first_hour;
mod golden;
mod hardening;
mod invariants;
mod journal;
mod journal_attest;
mod journal_lag;
mod layering;
mod mcp;
mod mesh;
mod new_advisor;
mod no_daemon_index;
mod operate;
mod progress_lines;
mod readme;
mod real_clis;
mod record_chain;
mod record_fixtures;
mod rtrip3_together;
mod rtrip_round_trip;
mod schema;
mod self_check;
mod socket_ownership;
mod spares;
mod systemd_unit;
mod track_record;
mod trust;
mod verify_parallel;
mod verify_progress;
mod writer_processes;
mod writer_rules;
