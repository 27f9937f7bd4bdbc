//! The daemon's unix socket: a private directory, a private socket, one daemon per socket,
//! a stale socket replaced, and every peer of another uid refused on accept.

use crate::ownership::{self, NotOurs};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};

/// Why the daemon could not take its socket.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Another daemon answers on the socket (or is starting on it right now).
    #[error(
        "another `advisord` already serves `{}`; stop it first (`advisor-consult --socket {} \
         daemon stop`) or pass another `--socket`",
        socket.display(),
        socket.display()
    )]
    AlreadyRunning {
        /// The socket.
        socket: PathBuf,
    },
    /// Something that is not a socket sits where the socket goes; it is never deleted.
    #[error(
        "`{}` exists and is not a socket; remove it yourself or pass another `--socket`",
        path.display()
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The socket's directory belongs to another user, so it cannot be trusted.
    #[error(
        "the socket directory `{}` belongs to uid {owner}, not to you (uid {me}); pass a \
         `--socket` in a directory of your own",
        dir.display()
    )]
    ForeignDirectory {
        /// The directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// The daemon's uid.
        me: u32,
    },
    /// The socket's directory is writable by other users (a shared one such as `/tmp`):
    /// anyone could replace the socket, and its mode is not the daemon's to change.
    #[error(
        "the socket directory `{}` is writable by other users (mode {mode:04o}); a daemon \
         never listens directly in a shared directory nor changes its mode; pass a `--socket` \
         in a directory of its own, e.g. `{}` (created 0700)",
        dir.display(),
        dir.join(format!("advisord-{}", ownership::me())).join("advisord.sock").display()
    )]
    SharedDirectory {
        /// The directory.
        dir: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The file system refused.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

fn io_err(context: String) -> impl FnOnce(io::Error) -> BindError {
    move |source| BindError::Io { context, source }
}

/// A bound socket: the listener, and the lock that makes it this daemon's alone.
///
/// Dropping it does not remove the socket; [`BoundSocket::remove`] does, at a clean exit.
pub struct BoundSocket {
    /// The listener (peer uids are checked by [`crate::daemon::conn::serve`]).
    pub listener: UnixListener,
    path: PathBuf,
    _lock: Flock<File>,
}

impl BoundSocket {
    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Split off the listener, keeping a guard that holds the lock and removes the socket
    /// file when dropped.
    pub fn into_parts(self) -> (UnixListener, SocketGuard) {
        (
            self.listener,
            SocketGuard {
                path: self.path,
                _lock: self._lock,
            },
        )
    }
}

/// Holds the socket's lock; removes the socket file when dropped (a clean exit).
pub struct SocketGuard {
    path: PathBuf,
    _lock: Flock<File>,
}

impl SocketGuard {
    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(socket = %self.path.display(), error = %e, "could not remove the socket");
            }
        }
    }
}

/// Take the socket at `path`: create its directory `0700` (or check that one of ours is
/// writable by nobody else, never changing its mode), take
/// the lock beside it, refuse when a daemon answers, replace a stale socket, bind, and make
/// the socket `0600`. Must be called inside a tokio runtime.
pub async fn bind(path: &Path) -> Result<BoundSocket, BindError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    private_dir(dir)?;
    let lock_path = lock_path(path);
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err(format!(
            "cannot open the lock `{}`",
            lock_path.display()
        )))?;
    let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock).map_err(|_| {
        BindError::AlreadyRunning {
            socket: path.to_path_buf(),
        }
    })?;
    match std::fs::symlink_metadata(path) {
        Ok(info) if info.file_type().is_socket() => {
            if answers(path).await {
                return Err(BindError::AlreadyRunning {
                    socket: path.to_path_buf(),
                });
            }
            tracing::info!(socket = %path.display(), "replacing a stale socket nobody answers on");
            std::fs::remove_file(path).map_err(io_err(format!(
                "cannot remove the stale socket `{}`",
                path.display()
            )))?;
        }
        Ok(_) => {
            return Err(BindError::NotASocket {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(format!("cannot inspect `{}`", path.display()))(e)),
    }
    let listener = UnixListener::bind(path).map_err(io_err(format!(
        "cannot bind the socket `{}`",
        path.display()
    )))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err(
        format!("cannot make `{}` private (0600)", path.display()),
    ))?;
    Ok(BoundSocket {
        listener,
        path: path.to_path_buf(),
        _lock: lock,
    })
}

/// The lock file beside a socket.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    socket.with_file_name(name)
}

/// Create `dir` as `0700`, or check that an existing one is ours and writable by nobody
/// else. A directory the daemon did not create keeps its mode: a shared one (`/tmp`) is
/// refused, never tightened, because other users and programs rely on it.
fn private_dir(dir: &Path) -> Result<(), BindError> {
    match ownership::check_dir(dir, ownership::me()) {
        Ok(true) => Ok(()),
        Err(NotOurs::ForeignDirectory { dir, owner, me }) => {
            Err(BindError::ForeignDirectory { dir, owner, me })
        }
        Err(NotOurs::SharedDirectory { dir, mode }) => {
            Err(BindError::SharedDirectory { dir, mode })
        }
        Err(other) => Err(io_err(format!("cannot use `{}`", dir.display()))(
            io::Error::other(other.to_string()),
        )),
        Ok(false) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(io_err(format!(
                "cannot create the socket directory `{}`",
                dir.display()
            ))),
    }
}

/// Whether something accepts connections on `path` (within a second).
pub async fn answers(path: &Path) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(1), UnixStream::connect(path)).await,
        Ok(Ok(_))
    )
}
