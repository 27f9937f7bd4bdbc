//! `advisor-consult`: everything a session does. See `docs/cli.md`.

fn main() -> std::process::ExitCode {
    advisord::cli::main()
}
