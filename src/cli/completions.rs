//! `completions SHELL` and `man`: generated from the clap definitions of the command line,
//! so they never drift from the flags.

use super::Cli;
use clap::CommandFactory;

/// The shells `completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash (`source <(advisor-consult completions bash)`).
    Bash,
    /// Zsh (write it as `_advisor-consult` in a directory of `$fpath`).
    Zsh,
    /// Fish (write it to `~/.config/fish/completions/advisor-consult.fish`).
    Fish,
}

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut command, "advisor-consult", &mut out);
    out
}

/// The manual page of `advisor-consult` (roff), its verbs included.
pub fn man() -> std::io::Result<Vec<u8>> {
    let command = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut out)?;
    // Each verb's page after the main one, so one file documents every flag.
    for verb in command.get_subcommands().filter(|v| !v.is_hide_set()) {
        let name = format!("advisor-consult-{}", verb.get_name());
        let verb = verb.clone().display_name(name);
        clap_mangen::Man::new(verb).render(&mut out)?;
    }
    Ok(out)
}

/// Write `bytes` to standard output; a closed pipe is not an error.
pub fn write(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
