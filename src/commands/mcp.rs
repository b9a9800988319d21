//! `baton mcp`: the Model Context Protocol server (stdio, the official `rmcp` SDK). Each
//! tool runs the same command code as the CLI, in JSON mode, inside one workspace: every
//! path argument must lie in it (opened beneath the workspace's fd, no symlink followed,
//! read from what was opened), and nothing is written outside the store.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{
    ErrorData as McpError, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::log::LogOptions;
use super::pull::PullOptions;
use super::push::PushOptions;
use super::resume::ResumeOptions;
use super::search::SearchOptions;
use crate::commands::Ctx;
use crate::output::{Outcome, error_json, terminal_safe};
use baton_error::{Error, ErrorKind, Result};
use baton_handoff::capture::{Attachment, SecretsMode};
use baton_handoff::events::{Kind, Role};
use baton_handoff::save::{self, SaveOptions, TranscriptSource};
use baton_store::beneath::{Dir, Entry, Refused};

/// What every tool call shares: where the store and the workspace are, and the workspace
/// opened once as a directory fd, beneath which every path a client names is opened.
struct Base {
    store: Option<PathBuf>,
    identity: Option<PathBuf>,
    workspace: PathBuf,
    root: Dir,
}

impl Base {
    fn ctx(&self) -> Ctx {
        Ctx {
            json: true,
            quiet: true,
            store: self
                .store
                .clone()
                .or_else(|| Some(self.workspace.join(".baton")).filter(|p| p.is_dir())),
            identity: self.identity.clone(),
        }
    }

    /// A path argument as a path relative to the workspace, decided by its text alone
    /// (nothing outside the workspace is ever looked at, so the answer cannot tell a
    /// client what exists there): absolute paths must lie under the workspace, `..` is
    /// refused everywhere.
    fn relative<'a>(&self, path: &'a str) -> Result<&'a Path> {
        let named = Path::new(path);
        let rel = if named.is_absolute() {
            named
                .strip_prefix(&self.workspace)
                .map_err(|_| self.outside(path))?
        } else {
            named
        };
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(self.outside(path));
        }
        Ok(rel)
    }

    fn outside(&self, path: &str) -> Error {
        Error::new(
            ErrorKind::Security,
            format!(
                "{path} is outside the workspace {}",
                self.workspace.display()
            ),
        )
        .with_hint("name files inside the workspace the server was started in, without '..'")
    }

    /// `path` opened beneath the workspace, component by component, no symlink followed:
    /// one met on the way, or at the end, is refused as security whether or not its
    /// target exists.
    fn open(&self, path: &str) -> Result<(PathBuf, Entry)> {
        let rel = self.relative(path)?;
        let shown = self.workspace.join(rel);
        let symlink = || {
            Error::new(
                ErrorKind::Security,
                format!(
                    "{path} is a symlink or passes through one in the workspace {}",
                    self.workspace.display()
                ),
            )
            .with_hint("name the file itself, inside the workspace; the server follows no symlink")
        };
        match self.root.entry(rel) {
            Ok(Entry::Symlink(_)) | Err(Refused::Symlink) => Err(symlink()),
            Err(Refused::Outside) => Err(self.outside(path)),
            Err(Refused::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::not_found(format!(
                    "{path} does not exist in the workspace {}",
                    self.workspace.display()
                ))
                .with_hint("name a file that exists in the workspace"))
            }
            Err(refused) => Err(refused.into_error("cannot open", &shown)),
            Ok(entry) => Ok((shown, entry)),
        }
    }

    /// An attachment, opened beneath the workspace, named as its last component (the
    /// workspace's own name for `.`).
    fn attachment(&self, path: &str) -> Result<Attachment> {
        let (shown, entry) = self.open(path)?;
        let name = shown
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::usage(format!("cannot attach {path}: no UTF-8 file name")))?
            .to_string();
        Ok(Attachment::Opened {
            name,
            shown,
            entry: Box::new(entry),
        })
    }

    /// A transcript FILE, opened beneath the workspace: a regular file only.
    fn transcript(&self, path: &str) -> Result<(PathBuf, std::fs::File)> {
        match self.open(path)? {
            (shown, Entry::File(file, _)) => Ok((shown, file)),
            (shown, _) => Err(Error::usage(format!(
                "transcript {} is not a regular file",
                shown.display()
            ))
            .with_hint("name a transcript file (JSON lines) in the workspace")),
        }
    }
}

#[derive(Clone)]
pub struct BatonServer {
    base: Arc<Base>,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SaveParams {
    /// The briefing (markdown with ## Objective, ## Current State, ## Next Steps, and
    /// optionally ## Risks / Watch Out, ## Open Questions, ## Suggested Prompt For Next
    /// Agent). Omit it for an evidence-only handoff.
    pub brief: Option<String>,
    /// The agent handing off.
    #[serde(default)]
    pub from: String,
    /// The agent taking over.
    #[serde(default)]
    pub to: String,
    /// claude-code[:SESSION|latest], codex[:SESSION|latest], gemini[:SESSION|latest], or
    /// a file in the workspace (a path as for attachments).
    pub transcript: Option<String>,
    /// Files or directories in the workspace to attach: relative to it (or absolute
    /// under it), without '..' and without a symlink on the way; the store is never
    /// attached.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// One line saying what the handoff is (default: from the Objective).
    #[serde(default)]
    pub summary: String,
    /// Personal data (emails, phone numbers, US SSNs, card numbers) in the briefing,
    /// summary and transcript: "redact" (default) stores placeholders, "allow" stores it
    /// as it is; both report kinds and counts.
    pub pii: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResumeParams {
    /// The handoff: an id, a unique prefix (8+ hex digits), current, current~N,
    /// targets/NAME (default: current).
    pub rev: Option<String>,
    /// Token budget of the kickoff (default 2000).
    pub budget: Option<usize>,
    /// Refuse (store_conflict) when the workspace is not the handoff's repository, has
    /// diverged from it, or cannot be placed.
    #[serde(default)]
    pub require_same_repo: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchParams {
    /// The handoff whose transcript to search (e.g. current).
    pub rev: String,
    /// Words that must all appear in an event's text; "" for every event.
    pub query: String,
    /// Only these roles: user, assistant, tool, system.
    #[serde(default)]
    pub role: Vec<String>,
    /// Only these kinds: message, tool_call, tool_result, reasoning, system.
    #[serde(default)]
    pub kind: Vec<String>,
    /// Only calls of, and results from, these tools.
    #[serde(default)]
    pub tool: Vec<String>,
    /// The next_cursor of a previous page.
    pub cursor: Option<String>,
    /// Leave total_matches out (null) and stop at the page: faster for common words.
    #[serde(default)]
    pub no_total: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LogParams {
    /// Where to start (default: current).
    pub rev: Option<String>,
    /// At most this many bundles (default 20).
    pub max: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RevParams {
    /// A bundle: id, unique prefix, current, current~N, targets/NAME.
    pub rev: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TargetParams {
    /// The target name (default: the only or the default target).
    pub target: Option<String>,
}

/// How a tool reaches a target: as the CLI does without --accept-new-host-key and
/// --timeout.
fn no_connect() -> baton_sync::ConnectSettings {
    super::connect(false, None)
}

/// A command's outcome as a tool result, or its error as a tool error carrying baton's
/// stable code and exit code.
fn reply(result: Result<Outcome>, text: impl FnOnce(&Outcome) -> Option<String>) -> CallToolResult {
    match result {
        Ok(outcome) => {
            let mut value = outcome.json.clone();
            if let Value::Object(map) = &mut value {
                map.insert("ok".into(), Value::Bool(true));
            }
            let mut result = CallToolResult::structured(value);
            if let Some(text) = text(&outcome) {
                result.content = vec![ContentBlock::text(text)];
            }
            result
        }
        Err(e) => CallToolResult::structured_error(json!({ "ok": false, "error": error_json(&e) })),
    }
}

fn parse_enums<T>(names: &[String], what: &str, parse: fn(&str) -> Option<T>) -> Result<Vec<T>> {
    names
        .iter()
        .map(|n| {
            parse(n).ok_or_else(|| {
                Error::usage(format!("unknown {what} '{n}'"))
                    .with_hint(format!("use one of the {what}s the tool's schema lists"))
            })
        })
        .collect()
}

impl BatonServer {
    /// Run blocking command code off the async reactor.
    async fn run(
        &self,
        work: impl FnOnce(&Base) -> Result<Outcome> + Send + 'static,
        text: impl FnOnce(&Outcome) -> Option<String> + Send + 'static,
    ) -> std::result::Result<CallToolResult, McpError> {
        let base = self.base.clone();
        let done = tokio::task::spawn_blocking(move || reply(work(&base), text)).await;
        done.map_err(|e| McpError::internal_error(format!("the tool stopped: {e}"), None))
    }
}

#[tool_router(router = tool_router)]
impl BatonServer {
    fn new(base: Base) -> Self {
        BatonServer {
            base: Arc::new(base),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        name = "save_handoff",
        description = "Save a handoff of the workspace: briefing, git evidence, the session transcript and attachments, secrets and personal data (emails, phones, SSNs, card numbers; pii: \"allow\" keeps them) redacted. Returns the bundle id."
    )]
    async fn save_handoff(
        &self,
        Parameters(p): Parameters<SaveParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                // Every path is opened here, beneath the workspace, and read from what was
                // opened: never opened again by name.
                let transcript = match p
                    .transcript
                    .as_deref()
                    .map(baton_handoff::sessions::Source::parse)
                {
                    Some(baton_handoff::sessions::Source::File(path)) => {
                        let (path, file) = base.transcript(&path.to_string_lossy())?;
                        Some(TranscriptSource::Opened(path, file))
                    }
                    Some(_) => p.transcript.clone().map(TranscriptSource::Named),
                    None => None,
                };
                let attachments = p
                    .attachments
                    .iter()
                    .map(|a| base.attachment(a))
                    .collect::<Result<Vec<_>>>()?;
                let pii = match p.pii.as_deref() {
                    None | Some("redact") => baton_handoff::pii::PiiMode::Redact,
                    Some("allow") => baton_handoff::pii::PiiMode::Allow,
                    Some(other) => {
                        return Err(Error::usage(format!(
                            "pii must be \"redact\" or \"allow\", not {other:?}"
                        ))
                        .with_hint("omit it to redact personal data"));
                    }
                };
                let opts = SaveOptions {
                    brief: p.brief.map(String::into_bytes),
                    attachments,
                    transcript,
                    secrets: SecretsMode::Redact,
                    pii,
                    from: p.from,
                    to: p.to,
                    summary: p.summary,
                    evidence: save::start_evidence(&base.workspace),
                    ..SaveOptions::new(base.workspace.clone())
                };
                super::save::run_handoff(&base.ctx(), opts).map(|(outcome, _)| outcome)
            },
            |_| None,
        )
        .await
    }

    #[tool(
        name = "resume",
        description = "Resume a handoff: verify it, compare the live workspace with the captured one, and return the kickoff (next steps, risks, recent turns) within a token budget."
    )]
    async fn resume(
        &self,
        Parameters(p): Parameters<ResumeParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                let args = ResumeOptions {
                    rev: p.rev,
                    budget: p.budget.unwrap_or(2000),
                    workspace: Some(base.workspace.clone()),
                    prompt: false,
                    require_same_repo: p.require_same_repo,
                    connect: no_connect(),
                    delivery: None,
                };
                super::resume::run_with(&base.ctx(), args)
            },
            // The kickoff quotes the briefing and the transcript: the text a client may
            // show on a terminal is made safe as the CLI's is; the structured JSON stays
            // exact.
            |outcome| Some(terminal_safe(&outcome.human).into_owned()),
        )
        .await
    }

    #[tool(
        name = "search",
        description = "Search a handoff's transcript: events whose text has every word of the query, filtered by role, kind and tool; at most 50 events / 8,000 tokens a page, with a cursor for the next."
    )]
    async fn search(
        &self,
        Parameters(p): Parameters<SearchParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                let args = SearchOptions {
                    rev: p.rev,
                    query: p.query,
                    cursor: p.cursor,
                    filter: baton_handoff::transcript::Filter {
                        roles: parse_enums(&p.role, "role", Role::from_name)?,
                        kinds: parse_enums(&p.kind, "kind", Kind::from_name)?,
                        tools: p.tool,
                    },
                    total: !p.no_total,
                };
                super::search::run_with(&base.ctx(), &args)
            },
            |_| None,
        )
        .await
    }

    #[tool(
        name = "log",
        description = "The handoff history from a bundle, newest first: who handed to whom, when, why."
    )]
    async fn log(
        &self,
        Parameters(p): Parameters<LogParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                let args = LogOptions {
                    rev: p.rev,
                    max: Some(p.max.unwrap_or(20)),
                    audit: false,
                    target: None,
                    connect: no_connect(),
                };
                super::log::run_with(&base.ctx(), args)
            },
            |_| None,
        )
        .await
    }

    #[tool(
        name = "show",
        description = "A bundle's manifest and every file in it with its size and BLAKE3 id."
    )]
    async fn show(
        &self,
        Parameters(p): Parameters<RevParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(move |base| super::show::run(&base.ctx(), &p.rev), |_| None)
            .await
    }

    #[tool(
        name = "push",
        description = "Push current to a target (SSH or local path); a lost race is a store_conflict error."
    )]
    async fn push(
        &self,
        Parameters(p): Parameters<TargetParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                let args = PushOptions {
                    target: p.target,
                    rev: None,
                    force: None,
                    connect: no_connect(),
                };
                super::push::run_to(&base.ctx(), args).map(|(outcome, _)| outcome)
            },
            |_| None,
        )
        .await
    }

    #[tool(
        name = "pull",
        description = "Pull a target's current and fast-forward the local current to it."
    )]
    async fn pull(
        &self,
        Parameters(p): Parameters<TargetParams>,
    ) -> std::result::Result<CallToolResult, McpError> {
        self.run(
            move |base| {
                let args = PullOptions {
                    target: p.target,
                    repair: false,
                    connect: no_connect(),
                };
                super::pull::run_with(&base.ctx(), args)
            },
            |_| None,
        )
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BatonServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("baton", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "baton stores and syncs handoffs between coding agents. To hand off: save_handoff \
             (then push). To take over: resume, then search for detail."
                .into(),
        );
        info
    }
}

pub fn run(ctx: &Ctx, workspace: Option<&Path>) -> Result<Outcome> {
    let workspace = workspace.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let workspace = std::fs::canonicalize(&workspace)
        .map_err(|e| Error::io("cannot open workspace", &workspace, e))?;
    let root =
        Dir::open(&workspace).map_err(|e| Error::io("cannot open workspace", &workspace, e))?;
    let server = BatonServer::new(Base {
        store: ctx.store.clone(),
        identity: ctx.identity.clone(),
        workspace,
        root,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::other(format!("cannot start the MCP server: {e}")))?;
    runtime.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::other(format!("MCP initialisation failed: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| Error::other(format!("the MCP server stopped: {e}")))?;
        Ok(Outcome::new(String::new(), json!({})))
    })
}
