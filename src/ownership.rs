//! Whose is this socket: the rules both sides of the daemon's socket apply before they
//! trust it.
//!
//! Requests carry the asking process's context, and a consultation carries its credential
//! values, so a client talks only to a socket that is its user's own:
//!
//! - the socket's directory is owned by the user and writable by nobody else (not group-
//!   or world-writable), so nobody else can have put the socket there or replace it;
//! - the socket file is owned by the user (and is a socket, not a symlink);
//! - the process serving it runs as the user (`SO_PEERCRED`).
//!
//! The daemon applies the first rule to the directory it is asked to listen in, and never
//! changes the mode of a directory it did not create (see `daemon::socket`).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why a socket (or its directory, or the process behind it) is not the user's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    /// The directory belongs to another user.
    #[error("its directory `{}` belongs to uid {owner}, not to you (uid {me})", dir.display())]
    ForeignDirectory {
        /// The directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// The user.
        me: u32,
    },
    /// The directory is writable by others (a shared directory such as `/tmp`).
    #[error(
        "its directory `{}` is writable by other users (mode {mode:04o}), so anyone could \
         have put a socket there",
        dir.display()
    )]
    SharedDirectory {
        /// The directory.
        dir: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// The socket file belongs to another user.
    #[error("the socket file belongs to uid {owner}, not to you (uid {me})")]
    ForeignSocket {
        /// Its owner.
        owner: u32,
        /// The user.
        me: u32,
    },
    /// Something other than a socket (a symlink, a file) sits at the socket path.
    #[error("`{}` is not a socket (a {kind})", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The process serving the socket runs as another user.
    #[error("the process serving it runs as uid {peer}, not as you (uid {me})")]
    ForeignPeer {
        /// The peer's uid.
        peer: u32,
        /// The user.
        me: u32,
    },
    /// The peer's credentials could not be read.
    #[error("the serving process's credentials cannot be read ({0})")]
    UnknownPeer(String),
}

impl NotOurs {
    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        "nothing was sent; use a socket in a directory only you can write: set \
         `XDG_RUNTIME_DIR`, or pass `--socket` (or `ADVISORD_SOCKET`) naming a path in a \
         directory you own with mode 0700, and start `advisord` there"
    }
}

/// The user this process runs as (the effective uid, as the kernel checks it).
pub fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The directory a socket lives in (`.` for a bare file name).
pub fn socket_dir(socket: &Path) -> &Path {
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether the existing directory `dir` is `me`'s own and writable by nobody else.
/// `Ok(false)` when it does not exist.
pub fn check_dir(dir: &Path, me: u32) -> Result<bool, NotOurs> {
    let info = match std::fs::metadata(dir) {
        Ok(info) => info,
        Err(_) => return Ok(false),
    };
    if info.uid() != me {
        return Err(NotOurs::ForeignDirectory {
            dir: dir.to_path_buf(),
            owner: info.uid(),
            me,
        });
    }
    let mode = info.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(NotOurs::SharedDirectory {
            dir: dir.to_path_buf(),
            mode,
        });
    }
    Ok(true)
}

/// Whether `socket` and its directory are `me`'s own (see the module documentation).
/// A socket that does not exist (yet) is fine when its directory is, or does not exist.
pub fn check_socket_path(socket: &Path, me: u32) -> Result<(), NotOurs> {
    check_dir(socket_dir(socket), me)?;
    let info = match std::fs::symlink_metadata(socket) {
        Ok(info) => info,
        Err(_) => return Ok(()),
    };
    let kind = info.file_type();
    if kind.is_symlink() || !kind.is_socket() {
        return Err(NotOurs::NotASocket {
            path: socket.to_path_buf(),
            kind: if kind.is_symlink() {
                "symbolic link"
            } else if kind.is_dir() {
                "directory"
            } else {
                "file"
            },
        });
    }
    if info.uid() != me {
        return Err(NotOurs::ForeignSocket {
            owner: info.uid(),
            me,
        });
    }
    Ok(())
}

/// Whether the process at the other end of a connected unix stream runs as `me`.
pub fn check_peer<S: std::os::fd::AsFd>(stream: &S, me: u32) -> Result<(), NotOurs> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials)
        .map_err(|e| NotOurs::UnknownPeer(e.desc().to_string()))?;
    if cred.uid() != me {
        return Err(NotOurs::ForeignPeer {
            peer: cred.uid(),
            me,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_of_ours_is_accepted_and_a_shared_one_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let me = me();
        assert_eq!(check_dir(dir.path(), me), Ok(true));
        assert_eq!(check_dir(&dir.path().join("missing"), me), Ok(false));
        for mode in [0o1777, 0o770, 0o757] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode))
                .expect("chmod");
            assert!(
                matches!(
                    check_dir(dir.path(), me),
                    Err(NotOurs::SharedDirectory { .. })
                ),
                "{mode:o}"
            );
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        assert_eq!(check_dir(dir.path(), me), Ok(true));
        let other = me.wrapping_add(1);
        assert!(matches!(
            check_dir(dir.path(), other),
            Err(NotOurs::ForeignDirectory { .. })
        ));
    }

    #[test]
    fn only_a_socket_of_ours_passes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let me = me();
        let socket = dir.path().join("s.sock");
        assert_eq!(check_socket_path(&socket, me), Ok(()));
        let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        assert_eq!(check_socket_path(&socket, me), Ok(()));
        let stream = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
        assert_eq!(check_peer(&stream, me), Ok(()));
        assert!(matches!(
            check_peer(&stream, me.wrapping_add(1)),
            Err(NotOurs::ForeignPeer { .. })
        ));
        drop(listener);
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&socket, &link).expect("symlink");
        assert!(matches!(
            check_socket_path(&link, me),
            Err(NotOurs::NotASocket { .. })
        ));
    }
}
