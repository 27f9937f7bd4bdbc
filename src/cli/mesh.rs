//! `mesh`: the peers whose answers count as reviews. A mesh peer's answers are recorded
//! but never counted until the user pins its key here (`mesh pin`), in `peers.yaml` of the
//! user's config directory; `advisors` prints the exact command for each unpinned peer.

use crate::cli::args::MeshAction;
use crate::error::Error;
use crate::pins;
use crate::render::Format;

/// Run `mesh pin|unpin|pins`.
pub fn run(action: &MeshAction, format: Format) -> anyhow::Result<i32> {
    let config = crate::trust::own_config_dir().ok_or_else(|| {
        Error::Usage(
            "cannot find your config directory: set `HOME` (or `XDG_CONFIG_HOME`) to an \
             absolute path"
                .into(),
        )
    })?;
    let file = pins::file_in(&config);
    match action {
        MeshAction::Pin {
            runtime,
            key,
            owner,
        } => {
            let pin = pins::Pin::new(runtime, key, owner.as_deref())
                .map_err(|e| Error::Usage(e.to_string()))?;
            let source = pin.source();
            pins::pin(&file, pin).map_err(|e| Error::Usage(e.to_string()))?;
            println!(
                "pinned `{runtime}` in `{}`: its answers count as reviews from source \
                 `{source}` (runtimes sharing its key or owner count once)",
                file.display()
            );
        }
        MeshAction::Unpin { runtime } => {
            if pins::unpin(&file, runtime).map_err(|e| Error::Usage(e.to_string()))? {
                println!("unpinned `{runtime}`: its answers are recorded, no longer counted");
            } else {
                return Err(Error::Usage(format!(
                    "`{runtime}` is not pinned in `{}`; `advisor-consult mesh pins` lists \
                     the pinned peers",
                    file.display()
                ))
                .into());
            }
        }
        MeshAction::Pins => {
            let pinned = pins::read(&file).map_err(|e| Error::Usage(e.to_string()))?;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&pinned)?),
                _ if pinned.peers.is_empty() => {
                    println!("no mesh peer is pinned: their answers are recorded, never counted")
                }
                _ => {
                    for pin in &pinned.peers {
                        println!("{} (source {}) key {}", pin.runtime, pin.source(), pin.key);
                    }
                }
            }
        }
    }
    Ok(0)
}
