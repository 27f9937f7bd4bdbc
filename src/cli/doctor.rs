//! `doctor`: is this setup ready? For each advisor what it needs, whether it is there and
//! the exact next step; the daemon and its socket; the state directory; the catalogue in
//! force; the `check` findings. It runs in-process and never starts a daemon. Exit 1 only
//! on a real problem (a state directory that cannot be written, a socket that is not the
//! user's, a `check` finding); an advisor that is not installed is not one, since
//! everything works without advisors.

use crate::check::Finding;
use crate::context::{untrusted_catalogue, Resolved};
use crate::core::catalogue::AdvisorEntry;
use crate::core::records::{Mode, Status};
use crate::facade::Api;
use crate::protocol::{HealthRequest, RequestContext};
use crate::render::text::Out;
use crate::render::{render, Format, Render};
use crate::{ownership, paths, service};
use advisord_adapters::registry::Registry;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// The catalogue in force and where it came from.
    pub catalogue: CatalogueCheck,
    /// One entry per advisor of the catalogue, in declaration order.
    pub advisors: Vec<AdvisorCheck>,
    /// The daemon on the socket.
    pub daemon: DaemonCheck,
    /// Where records go.
    pub state: StateCheck,
    /// The `check` findings over what `.advisord/project.yaml` declares.
    pub check: CheckSummary,
    /// How many real problems were found (exit 1 when any).
    pub problems: usize,
}

/// The catalogue in force.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogueCheck {
    /// A path, or the embedded catalogue.
    pub source: String,
    /// The mode in force.
    pub mode: Mode,
    /// Why the repository's own catalogue is not used, when it exists untrusted.
    pub untrusted: Option<String>,
}

/// One advisor.
#[derive(Debug, Clone, Serialize)]
pub struct AdvisorCheck {
    /// Its id.
    pub id: String,
    /// What it needs to be asked: an executable, a credential, an endpoint.
    pub needs: Vec<String>,
    /// Its status now.
    pub status: Status,
    /// Why.
    pub reason: String,
    /// What to do so that it can be asked, when it cannot.
    pub next_step: Option<String>,
    /// Its HTTP endpoint, asked once by `doctor` whatever the entry's `local` says, and
    /// whether it answered; `None` for an advisor without an endpoint or not available.
    pub endpoint: Option<EndpointCheck>,
    /// Whether this is a real problem: an advisor that counts as available but whose
    /// endpoint does not answer (a stopped gateway). An advisor that is simply absent is
    /// reported state, not a problem.
    pub problem: bool,
}

/// An HTTP advisor's endpoint, asked once by `doctor`.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointCheck {
    /// The endpoint from the catalogue.
    pub url: String,
    /// Whether any HTTP answer came back within the probe's bound.
    pub answering: bool,
    /// What was seen: `answered`, or why not (refused, no answer within the bound).
    pub detail: String,
}

/// The daemon and its socket.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonCheck {
    /// The socket.
    pub socket: PathBuf,
    /// Whether a daemon answers there.
    pub answering: bool,
    /// Its version, when it answers.
    pub version: Option<String>,
    /// Its process id, when it answers.
    pub pid: Option<u32>,
    /// What was seen.
    pub detail: String,
    /// Whether this is a real problem.
    pub problem: bool,
    /// What to do, if anything.
    pub next_step: Option<String>,
}

/// The state directory.
#[derive(Debug, Clone, Serialize)]
pub struct StateCheck {
    /// Where the records of this root go.
    pub dir: PathBuf,
    /// Whether the root is inside a git repository.
    pub in_git: bool,
    /// Whether the directory exists yet (it is created by the first record).
    pub exists: bool,
    /// Whether records can be written there.
    pub writable: bool,
    /// Whether this is a real problem.
    pub problem: bool,
    /// What to do, if anything.
    pub next_step: Option<String>,
}

/// The `check` findings.
#[derive(Debug, Clone, Serialize)]
pub struct CheckSummary {
    /// Whether the project declares what `check` covers.
    pub declared: bool,
    /// Files scanned.
    pub files_scanned: usize,
    /// The findings.
    pub findings: Vec<Finding>,
    /// Notes (what was not checked and why).
    pub notes: Vec<String>,
}

/// Run `doctor` on `ctx` (in-process; the daemon is only probed, never started).
pub async fn run(ctx: &RequestContext, socket: &Path, format: Format) -> anyhow::Result<i32> {
    let registry = Registry::builtin();
    let resolved = Resolved::resolve(ctx, &registry)?;
    let view = service::advisors(&registry, ctx)?;
    let advisors = view
        .advisors
        .iter()
        .map(|row| {
            let entry = resolved.catalogue.get(&row.id);
            // Only an advisor that would be asked is worth a connection: the others
            // already say why they are not asked.
            let endpoint = entry
                .filter(|_| row.status == Status::Available)
                .and_then(endpoint_check);
            let mut check = AdvisorCheck {
                id: row.id.clone(),
                needs: entry.map(needs).unwrap_or_default(),
                status: row.status,
                reason: row.reason.clone(),
                next_step: next_step(row.status, &row.id, entry, view.mode, row.until.as_deref()),
                endpoint,
                problem: false,
            };
            endpoint_problem(&mut check);
            check
        })
        .collect::<Vec<AdvisorCheck>>();
    let report = service::check(&registry, ctx, None)?;
    let check = CheckSummary {
        declared: report.declared,
        files_scanned: report.files_scanned,
        findings: report.findings,
        notes: report.notes,
    };
    let daemon = daemon_check(socket).await;
    let state = state_check(&resolved.root, &resolved.state_dir);
    let problems = usize::from(daemon.problem)
        + usize::from(state.problem)
        + check.findings.len()
        + advisors.iter().filter(|a| a.problem).count();
    let report = DoctorReport {
        catalogue: CatalogueCheck {
            source: resolved.catalogue_source.clone(),
            mode: view.mode,
            untrusted: untrusted_catalogue(ctx),
        },
        advisors,
        daemon,
        state,
        check,
        problems,
    };
    super::print_stdout(&render(&report, format))?;
    Ok(if report.problems == 0 { 0 } else { 1 })
}

fn needs(entry: &AdvisorEntry) -> Vec<String> {
    let mut needs = Vec::new();
    if let Some(executable) = &entry.executable {
        needs.push(format!("`{executable}` on PATH"));
    }
    if let Some(credential) = &entry.credential {
        needs.push(format!("`{credential}` set"));
    }
    if let Some(endpoint) = entry.settings.get("endpoint").and_then(|e| e.as_str()) {
        needs.push(format!("`{endpoint}` answering"));
    }
    if needs.is_empty() {
        needs.push("nothing on this machine".to_string());
    }
    needs
}

/// Ask the entry's endpoint once, with the same short bound availability uses for local
/// servers. Availability probes only `local: true` entries on every request (a remote API
/// is not asked before each plan), so a gateway or proxy that is down is invisible there;
/// `doctor` is where the user asks, so it asks every endpoint.
fn endpoint_check(entry: &AdvisorEntry) -> Option<EndpointCheck> {
    let url = entry.settings.get("endpoint").and_then(|e| e.as_str())?;
    let result =
        advisord_adapters::http::probe::probe(url, advisord_adapters::http::probe::PROBE_BOUND);
    Some(EndpointCheck {
        url: url.to_string(),
        answering: result.is_ok(),
        detail: match result {
            Ok(()) => "answered".to_string(),
            Err(why) => why,
        },
    })
}

/// An advisor that counts as available while its endpoint does not answer is a problem:
/// its consultations would fail. Any other status already says why it is not asked.
fn endpoint_problem(check: &mut AdvisorCheck) {
    let Some(endpoint) = &check.endpoint else {
        return;
    };
    if endpoint.answering {
        return;
    }
    check.problem = true;
    check.reason = format!(
        "{}; but its endpoint `{}` does not answer ({})",
        check.reason, endpoint.url, endpoint.detail
    );
    check.next_step = Some(format!(
        "start the server at `{}` (a gateway or proxy in front of the model), or correct \
         `endpoint` in the catalogue; until then its consultations fail",
        endpoint.url
    ));
}

fn next_step(
    status: Status,
    id: &str,
    entry: Option<&AdvisorEntry>,
    mode: Mode,
    until: Option<&str>,
) -> Option<String> {
    let executable = entry.and_then(|e| e.executable.as_deref()).unwrap_or(id);
    let credential = entry
        .and_then(|e| e.credential.as_deref())
        .unwrap_or("its credential");
    Some(match status {
        Status::Available => return None,
        Status::Unavailable if Path::new(executable).is_absolute() => {
            format!("install it so that `{executable}` exists and is executable")
        }
        Status::Unavailable => format!(
            "install `{executable}` and put its directory on the PATH of the shell that runs \
             advisor-consult"
        ),
        Status::NotConfigured => format!(
            "`export {credential}=...` in the shell that runs advisor-consult (only the \
             adapter that sends it reads it)"
        ),
        Status::Disabled if matches!(mode, Mode::Ci | Mode::Offline) => format!(
            "the mode `{}` leaves it out; set `ADVISORD_MODE=standard` (or unset `CI`) to ask it",
            mode.as_str()
        ),
        Status::Disabled => {
            format!("remove `{id}` from `ADVISORD_ADVISORS_DISABLE` (or unset it)")
        }
        Status::RateLimited | Status::TemporarilyFailed => format!(
            "wait{}, or set `ADVISORD_COOLDOWN_SECONDS=0` to ask it now",
            until.map(|u| format!(" until {u}")).unwrap_or_default()
        ),
        Status::OverBudget => "see `advisor-consult spend`; raise the limit in the catalogue \
                               or wait for the next window"
            .to_string(),
    })
}

async fn daemon_check(socket: &Path) -> DaemonCheck {
    let mut check = DaemonCheck {
        socket: socket.to_path_buf(),
        answering: false,
        version: None,
        pid: None,
        detail: String::new(),
        problem: false,
        next_step: None,
    };
    if let Err(e) = ownership::check_socket_path(socket, ownership::me()) {
        check.detail = e.to_string();
        check.problem = true;
        check.next_step = Some(format!(
            "use a socket of your own: `--socket PATH` or `{}`",
            paths::ENV_SOCKET
        ));
        return check;
    }
    if let Err(reason) = crate::client::answers(socket) {
        check.detail = format!("no daemon answers ({reason})");
        check.next_step = Some(
            "nothing to do: the first verb that needs it starts one (or run `advisord --detach`)"
                .to_string(),
        );
        return check;
    }
    let client =
        crate::client::Client::new(socket.to_path_buf()).with_request_bound(Duration::from_secs(2));
    match client.health(HealthRequest {}).await {
        Ok(health) => {
            check.answering = true;
            check.detail = format!(
                "advisord {} (pid {}) up {} s",
                health.version, health.pid, health.uptime_s
            );
            check.version = Some(health.version);
            check.pid = Some(health.pid);
        }
        Err(e) => {
            check.detail = format!("something answers but not as advisord: {e}");
            check.problem = true;
            check.next_step = Some(format!(
                "stop what listens on `{}`, or pass `--socket PATH`",
                socket.display()
            ));
        }
    }
    check
}

fn state_check(root: &Path, dir: &Path) -> StateCheck {
    let in_git = root.ancestors().any(|a| a.join(".git").exists());
    let exists = dir.is_dir();
    // The directory, or the nearest ancestor that exists, is where the first write lands.
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"));
    let writable = nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK).is_ok();
    let next_step = if !writable {
        Some(format!(
            "make `{}` writable, or pass `--state-dir DIR` somewhere you can write",
            existing.display()
        ))
    } else if !in_git {
        Some(format!(
            "`{}` is not in a git repository: records go under it as shown; pass `--root DIR` \
             to keep them with a project",
            root.display()
        ))
    } else {
        None
    };
    StateCheck {
        dir: dir.to_path_buf(),
        in_git,
        exists,
        writable,
        problem: !writable,
        next_step,
    }
}

impl Render for DoctorReport {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.line(&format!(
            "catalogue: {} (mode {})",
            self.catalogue.source,
            self.catalogue.mode.as_str()
        ));
        if let Some(untrusted) = &self.catalogue.untrusted {
            out.para(2, 2, untrusted);
        }
        out.blank();
        out.line("advisors:");
        for advisor in &self.advisors {
            out.line(&format!(
                "  {}  {}{}",
                advisor.id,
                advisor.status.as_str(),
                if advisor.problem { "  PROBLEM" } else { "" }
            ));
            out.para(
                4,
                2,
                &format!("needs {}; {}", advisor.needs.join(", "), advisor.reason),
            );
            if let Some(step) = &advisor.next_step {
                out.para(4, 2, &format!("next: {step}"));
            }
        }
        out.blank();
        let mark = |problem: bool| if problem { "PROBLEM" } else { "ok" };
        out.line(&format!("daemon: {}", mark(self.daemon.problem)));
        out.para(
            2,
            2,
            &format!(
                "socket `{}`: {}",
                self.daemon.socket.display(),
                self.daemon.detail
            ),
        );
        if let Some(step) = &self.daemon.next_step {
            out.para(2, 2, &format!("next: {step}"));
        }
        out.blank();
        out.line(&format!("state: {}", mark(self.state.problem)));
        out.para(
            2,
            2,
            &format!(
                "records go to `{}` ({}, {}{})",
                self.state.dir.display(),
                if self.state.exists {
                    "exists"
                } else {
                    "created by the first record"
                },
                if self.state.writable {
                    "writable"
                } else {
                    "NOT writable"
                },
                if self.state.in_git {
                    ", in a git repository"
                } else {
                    ", not in a git repository"
                },
            ),
        );
        if let Some(step) = &self.state.next_step {
            out.para(2, 2, &format!("next: {step}"));
        }
        out.blank();
        out.line(&format!(
            "check: {} finding{} in {} file{}",
            self.check.findings.len(),
            if self.check.findings.len() == 1 {
                ""
            } else {
                "s"
            },
            self.check.files_scanned,
            if self.check.files_scanned == 1 {
                ""
            } else {
                "s"
            },
        ));
        for finding in &self.check.findings {
            out.para(
                2,
                2,
                &format!("{}:{}: {}", finding.file, finding.line, finding.message),
            );
        }
        for note in &self.check.notes {
            out.para(2, 2, note);
        }
        out.blank();
        out.line(&match self.problems {
            0 => "no problems".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        });
        out.finish()
    }
}
