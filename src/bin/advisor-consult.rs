//! `advisor-consult`: everything a session does (SPEC §10). See `docs/cli.md`.

fn main() -> std::process::ExitCode {
    advisord::cli::main()
}
