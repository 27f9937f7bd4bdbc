//! The TCP listener's token: a secret the daemon keeps in its data directory and the
//! user's own processes read (`advisor-consult cockpit` puts it in the page's URL). Here,
//! below both, so that neither side reaches into the other for it.

use std::fmt;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// The token's file in the data directory (mode `0600`).
pub const TOKEN_FILE: &str = "cockpit.token";

/// The listener's secret. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// The token kept in `data_dir`, generated (and saved `0600`) the first time.
    pub fn load_or_create(data_dir: &Path) -> io::Result<Token> {
        let path = token_path(data_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) if is_token(text.trim()) => {
                // Ours, in our private directory: keep it private whatever happened to it.
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
                return Ok(Token(text.trim().to_string()));
            }
            Ok(_) => std::fs::remove_file(&path)?, // not a token: made again
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        let token = hex::encode(bytes);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(token.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        Ok(Token(token))
    }

    /// The token read from `path` (the client side: `advisor-consult cockpit`).
    pub fn read(path: &Path) -> io::Result<Token> {
        let text = std::fs::read_to_string(path)?;
        Token::parse(&text).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "the file does not hold a token")
        })
    }

    /// A token written as text (64 hex digits, surrounding whitespace ignored).
    pub fn parse(text: &str) -> Option<Token> {
        let text = text.trim();
        is_token(text).then(|| Token(text.to_string()))
    }

    /// The secret itself, for the URL the user opens. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token (in time independent of where they differ).
    pub fn matches(&self, given: &str) -> bool {
        self.0.as_bytes().ct_eq(given.as_bytes()).into()
    }
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where the token of a daemon using `data_dir` lives.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_and_never_show() {
        let token = Token("ab".repeat(32));
        assert!(token.matches(&"ab".repeat(32)));
        assert!(!token.matches(&"ab".repeat(31)));
        assert!(!token.matches(&format!("{}ac", "ab".repeat(31))));
        assert_eq!(format!("{token:?}"), "Token(…)");
    }

    #[test]
    fn a_token_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let first = Token::load_or_create(dir.path()).unwrap();
        let again = Token::load_or_create(dir.path()).unwrap();
        assert_eq!(first, again);
        let mode = std::fs::metadata(token_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Token::read(&token_path(dir.path())).unwrap(), first);
    }
}
