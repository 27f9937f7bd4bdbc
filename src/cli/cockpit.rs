//! `advisor-consult cockpit [--open]`: the URL of the daemon's cockpit page, carrying the
//! TCP listener's token (read from the file the daemon names in `health`, which only the
//! user can read), the asker's root and task, and the catalogue and state directory when
//! named (which this command, through the socket, names to the daemon for the page);
//! `--open` hands it to `xdg-open`.

use crate::error::Error;
use crate::facade::Api;
use crate::protocol::token::Token;
use crate::protocol::{HealthRequest, RequestContext};
use crate::render::Format;

/// `cockpit`: print (or open) the page's URL; exit 0.
pub async fn run(
    api: &dyn Api,
    ctx: &RequestContext,
    open: bool,
    format: Format,
) -> anyhow::Result<i32> {
    let health = api.health(HealthRequest {}).await?;
    let Some(listening) = health.listening else {
        return Err(Error::Usage(
            "the daemon serves no TCP listener, so there is no cockpit to open; start one \
             with `advisord --listen 127.0.0.1:7433` (stop the running daemon first), then \
             run `advisor-consult cockpit` again"
                .into(),
        )
        .into());
    };
    let token = Token::read(&listening.token_file).map_err(|e| {
        Error::Usage(format!(
            "cannot read the cockpit's token from `{}`: {e}; run this as the user the daemon \
             runs as",
            listening.token_file.display()
        ))
    })?;
    if ctx.catalogue_path.is_some() || ctx.state_dir.is_some() {
        // Over TCP the page may name only a catalogue and a state directory the user's own
        // processes named through the socket: this request, from the user's shell, does.
        // Whether the root and task serve is for the page to show, so its answer is not
        // needed here.
        let _ = api
            .tasks(crate::protocol::TasksRequest {
                context: ctx.clone(),
            })
            .await;
    }
    let url = url(&listening.address, &token, ctx);
    match format {
        Format::Json => {
            crate::cli::print_stdout(&serde_json::json!({ "url": url }).to_string())?;
        }
        Format::Yaml => crate::cli::print_stdout(&format!("url: '{url}'"))?,
        Format::Plain | Format::Table => crate::cli::print_stdout(&url)?,
    }
    if open {
        match which::which("xdg-open") {
            Ok(opener) => {
                std::process::Command::new(opener)
                    .arg(&url)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| {
                        Error::Usage(format!(
                            "cannot run `xdg-open`: {e}; open the URL above yourself"
                        ))
                    })?;
            }
            Err(_) => eprintln!(
                "advisor-consult: no `xdg-open` on `PATH`; open the URL above in a browser"
            ),
        }
    }
    Ok(0)
}

/// The page's URL: the listener, the token to trade for a cookie, the root and the task.
fn url(address: &str, token: &Token, ctx: &RequestContext) -> String {
    let mut url = format!(
        "http://{address}/cockpit?token={}&root={}",
        token.expose(),
        encode(&ctx.root.display().to_string())
    );
    if let Some(task) = &ctx.task {
        url.push_str("&task=");
        url.push_str(&encode(task));
    }
    // What the asker named explicitly, so the page sees the records and advisors it sees.
    for (name, path) in [
        ("state_dir", &ctx.state_dir),
        ("catalogue", &ctx.catalogue_path),
    ] {
        if let Some(path) = path {
            url.push_str(&format!("&{name}={}", encode(&path.display().to_string())));
        }
    }
    url
}

/// `text` percent-encoded for a query value.
fn encode(text: &str) -> String {
    crate::protocol::query_value(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_carries_token_root_and_task_encoded() {
        let ctx: RequestContext =
            serde_json::from_value(serde_json::json!({"root": "/a b/c&d", "task": "t+1"})).unwrap();
        let token = Token::parse(&"0f".repeat(32)).unwrap();
        assert_eq!(
            url("127.0.0.1:7433", &token, &ctx),
            format!(
                "http://127.0.0.1:7433/cockpit?token={}&root=/a%20b/c%26d&task=t%2B1",
                "0f".repeat(32)
            )
        );
    }
}
