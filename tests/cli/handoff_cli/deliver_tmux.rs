//! Handoff CLI: `baton resume --deliver tmux:PANE` against a real tmux server (its own
//! socket in a temporary directory, killed at the end) and a stand-in harness: a perl
//! script that names itself `claude` or `codex` (as tmux's `#{pane_current_command}` sees
//! it), asks for bracketed paste as the real harnesses do, shows a prompt marker and
//! writes every byte typed to it to a file.

use super::*;

use std::time::{Duration, Instant};

/// The stand-in harness. Arguments: the name it takes, the file it writes what it reads
/// to, and a mode: `ready` (the default marker at once), `when=PATH` (the marker once
/// PATH exists), `busy` (the marker beside a busy line: never ready), `custom` (only `READY>`).
const STANDIN: &str = r#"#!/usr/bin/perl
use strict;
use warnings;
my ($name, $out, $mode) = @ARGV;
$0 = $name;
$| = 1;
system("stty raw -echo");
print "\e[?2004h";
open(my $fh, ">>", $out) or die "open $out: $!";
$fh->autoflush(1);
if ($mode eq "busy") {
    print "? for shortcuts\r\n* Thinking... (esc to interrupt)\r\n";
} elsif ($mode eq "custom") {
    print "READY>\r\n";
} elsif ($mode =~ /^when=(.+)$/) {
    print "starting...\r\n";
    select(undef, undef, undef, 0.02) until -e $1;
    print "? for shortcuts\r\n";
} else {
    print "? for shortcuts\r\n";
}
while (1) {
    my $n = sysread(STDIN, my $buf, 65536);
    last unless $n;
    print $fh $buf;
    print "[received ", length($buf), " bytes]\r\n";
}
"#;

/// A tmux server of our own, killed when dropped.
struct Tmux {
    dir: tempfile::TempDir,
}

impl Tmux {
    /// A server, or None where tmux or perl is missing (a failure under CI=true).
    fn start() -> Option<Tmux> {
        let has = |program: &str, flag: &str| {
            std::process::Command::new(program)
                .arg(flag)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !common::precondition(has("tmux", "-V") && has("perl", "-v"), "tmux and perl") {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("standin"), STANDIN).expect("write stand-in");
        fs::set_permissions(
            dir.path().join("standin"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        Some(Tmux { dir })
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The `TMUX` value that points a tmux client (baton's) at this server.
    fn env_value(&self) -> String {
        format!("{},0,0", s(&self.socket()))
    }

    fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A new session running `argv` directly (no shell); its pane id.
    fn pane(&self, argv: &[&str]) -> String {
        let mut args = vec!["new-session", "-d", "-P", "-F", "#{pane_id}"];
        args.extend(["-x", "160", "-y", "50", "--"]);
        args.extend_from_slice(argv);
        self.run(&args)
    }

    /// A stand-in named `name` in `mode`, writing what it reads to `out`; its pane, once
    /// tmux sees it under that name.
    fn standin(&self, name: &str, out: &Path, mode: &str) -> String {
        let standin = s(&self.dir.path().join("standin"));
        let pane = self.pane(&[&standin, name, &s(out), mode]);
        self.wait_for_command(&pane, name);
        pane
    }

    fn wait_for_command(&self, pane: &str, name: &str) {
        let start = Instant::now();
        loop {
            let now = self.run(&["display", "-p", "-t", pane, "#{pane_current_command}"]);
            if now == name {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "pane {pane} runs {now}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn screen(&self, pane: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", pane])
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .arg("kill-server")
            .output();
    }
}

/// A workspace (a git repository) with a saved handoff of a multi-line briefing.
fn handoff() -> (Env, PathBuf, String) {
    let env = Env::new();
    env.init();
    let ws = git_init(&env.path().join("ws"));
    commit(&ws, "a.txt", "a\n", "one");
    let brief = env.path().join("brief.md");
    fs::write(&brief, VALID_BRIEF).expect("write");
    let id = ok(
        baton_in(&env, &ws, &["save", "--brief", &s(&brief)]),
        "save",
    )
    .trim()
    .to_string();
    (env, ws, id)
}

fn deliver(env: &Env, tmux: &Tmux, ws: &Path, args: &[&str]) -> Output {
    env.cmd()
        .current_dir(ws)
        .env("TMUX", tmux.env_value())
        .arg("resume")
        .args(args)
        .output()
        .expect("run baton")
}

/// The file's bytes once they hold `want` (or after 10 s), then after a further pause:
/// whatever arrives late (a second paste) is in the answer too.
fn received(out: &Path, want: usize) -> Vec<u8> {
    let start = Instant::now();
    while fs::read(out).map_or(0, |b| b.len()) < want && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(400));
    fs::read(out).unwrap_or_default()
}

/// What the pane's program reads for `prompt`: one bracketed paste, each line break as
/// the carriage return a terminal sends, then Enter (`submit`).
fn pasted(prompt: &str, submit: bool) -> Vec<u8> {
    let mut bytes = b"\x1b[200~".to_vec();
    bytes.extend(prompt.replace('\n', "\r").as_bytes());
    bytes.extend(b"\x1b[201~");
    if submit {
        bytes.push(b'\r');
    }
    bytes
}

#[test]
fn the_kickoff_arrives_once_whole_and_bracketed() {
    let Some(tmux) = Tmux::start() else { return };
    let (env, ws, id) = handoff();
    let prompt = json_in(&env, &ws, &["resume"])["prompt"]
        .as_str()
        .expect("prompt")
        .to_string();
    assert!(prompt.lines().count() > 10, "a multi-line prompt: {prompt}");

    // Claude, with --json: the document says what was delivered, stderr stays quiet.
    let out = tmux.dir.path().join("claude.out");
    let pane = tmux.standin("claude", &out, "ready");
    let run = deliver(
        &env,
        &tmux,
        &ws,
        &["--json", "--deliver", &format!("tmux:{pane}")],
    );
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert_eq!(stderr(&run), "");
    let doc = doc(&run);
    assert_eq!(doc["bundle"], id.as_str());
    assert_eq!(doc["prompt"], prompt.as_str());
    let delivered = &doc["delivered"];
    assert_eq!(delivered["via"], "tmux");
    assert_eq!(delivered["harness"], "claude");
    assert_eq!(delivered["pane"], pane.as_str());
    assert_eq!(delivered["pane_id"], pane.as_str());
    assert_eq!(delivered["bytes"], prompt.len());
    assert_eq!(delivered["submitted"], true);
    let want = pasted(&prompt, true);
    assert_eq!(
        String::from_utf8_lossy(&received(&out, want.len())),
        String::from_utf8_lossy(&want)
    );

    // Codex, found by its name, by a session:window.pane target, in text mode: the one
    // notification line on stderr, nothing on stdout (the kickoff is in the pane).
    let out = tmux.dir.path().join("codex.out");
    let pane = tmux.standin("codex", &out, "ready");
    let session = tmux.run(&["display", "-p", "-t", &pane, "#{session_name}"]);
    let run = deliver(
        &env,
        &tmux,
        &ws,
        &["--deliver", &format!("tmux:{session}:0.0")],
    );
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert_eq!(stdout(&run), "");
    let short = &id[..12];
    assert!(
        stderr(&run).ends_with(&format!(
            "delivered the kickoff of {short} to tmux pane {pane} (codex)\n"
        )),
        "{}",
        stderr(&run)
    );
    let want = pasted(&prompt, true);
    assert_eq!(received(&out, want.len()), want);
}

#[test]
fn a_pane_that_becomes_ready_later_gets_the_kickoff_then() {
    let Some(tmux) = Tmux::start() else { return };
    let (env, ws, id) = handoff();
    let prompt = json_in(&env, &ws, &["resume"])["prompt"]
        .as_str()
        .expect("prompt")
        .to_string();
    let out = tmux.dir.path().join("later.out");
    let go = tmux.dir.path().join("go");
    let pane = tmux.standin("claude", &out, &format!("when={}", s(&go)));
    let mut baton = env
        .cmd()
        .current_dir(&ws)
        .env("TMUX", tmux.env_value())
        .args([
            "resume",
            "--deliver",
            &format!("tmux:{pane}"),
            "--no-submit",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run baton");
    // Not ready yet: baton waits, and types nothing.
    std::thread::sleep(Duration::from_millis(700));
    assert!(baton.try_wait().expect("wait").is_none(), "baton waits");
    assert_eq!(fs::read(&out).unwrap_or_default(), b"");
    fs::write(&go, "").expect("write");
    let run = baton.wait_with_output().expect("baton ends");
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(
        stderr(&run).contains(&format!(
            "delivered the kickoff of {} to tmux pane {pane} (claude), not submitted\n",
            &id[..12]
        )),
        "{}",
        stderr(&run)
    );
    // --no-submit: the paste, and no Enter after it.
    let want = pasted(&prompt, false);
    assert_eq!(received(&out, want.len()), want);
}

#[test]
fn panes_running_something_else_are_refused_and_get_nothing() {
    let Some(tmux) = Tmux::start() else { return };
    let (env, ws, _) = handoff();
    // A shell that would keep every byte typed to it.
    let sh_out = tmux.dir.path().join("sh.out");
    let script = format!("stty raw -echo; cat >> '{}'; :", s(&sh_out));
    let sh = tmux.pane(&["sh", "-c", &script]);
    tmux.wait_for_command(&sh, "sh");
    let sleep = tmux.pane(&["sleep", "600"]);
    tmux.wait_for_command(&sleep, "sleep");
    for (pane, name) in [(&sh, "sh"), (&sleep, "sleep")] {
        let start = Instant::now();
        let run = deliver(&env, &tmux, &ws, &["--deliver", &format!("tmux:{pane}")]);
        assert_eq!(code(&run), 2, "{}", stderr(&run));
        assert!(start.elapsed() < Duration::from_secs(5), "refused at once");
        assert_eq!(
            stderr(&run).lines().last().unwrap_or_default(),
            format!(
                "error: tmux pane {pane} runs \"{name}\", not claude or codex: nothing was \
                 typed; start claude or codex in that pane first, or name the pane that runs it"
            )
        );
        assert_eq!(stdout(&run), "");
    }
    // A claude pane when codex was asked for: refused too, in JSON as usage.
    let out = tmux.dir.path().join("claude.out");
    let claude = tmux.standin("claude", &out, "ready");
    let args = [
        "--json",
        "--deliver",
        &format!("tmux:{claude}"),
        "--harness",
        "codex",
    ];
    let run = deliver(&env, &tmux, &ws, &args);
    assert_eq!(code(&run), 2);
    let doc = doc(&run);
    assert_eq!(doc["error"]["code"], "usage");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("runs \"claude\", not codex")),
        "{doc}"
    );
    // No such pane: not found, exit 3. Not a tmux target: usage.
    let run = deliver(&env, &tmux, &ws, &["--deliver", "tmux:%999"]);
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert!(
        stderr(&run).starts_with("error: no tmux pane \"%999\""),
        "{}",
        stderr(&run)
    );
    let run = deliver(&env, &tmux, &ws, &["--deliver", "screen:1"]);
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    // Nothing reached any of them.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fs::read(&sh_out).unwrap_or_default(), b"");
    assert_eq!(fs::read(&out).unwrap_or_default(), b"");
    assert!(
        !tmux.screen(&sleep).contains("Handoff"),
        "{}",
        tmux.screen(&sleep)
    );
}

#[test]
fn a_pane_that_never_shows_readiness_times_out_with_nothing_typed() {
    let Some(tmux) = Tmux::start() else { return };
    let (env, ws, _) = handoff();
    // Busy: the prompt marker is there, but so is the busy line.
    let busy_out = tmux.dir.path().join("busy.out");
    let busy = tmux.standin("claude", &busy_out, "busy");
    let start = Instant::now();
    let args = [
        "--deliver",
        &format!("tmux:{busy}"),
        "--deliver-timeout",
        "1",
    ];
    let run = deliver(&env, &tmux, &ws, &args);
    let took = start.elapsed();
    assert_eq!(code(&run), 1, "{}", stderr(&run));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let err = stderr(&run);
    assert!(
        err.starts_with(&format!(
            "error: tmux pane {busy} runs claude but did not show its input prompt within \
             1 s: nothing was typed; "
        )),
        "{err}"
    );
    assert!(err.contains("BATON_CLAUDE_READY_MARKER"), "{err}");
    // A marker of its own: not ready by the defaults, ready by BATON_CLAUDE_READY_MARKER.
    let custom_out = tmux.dir.path().join("custom.out");
    let custom = tmux.standin("claude", &custom_out, "custom");
    let args = [
        "--deliver",
        &format!("tmux:{custom}"),
        "--deliver-timeout",
        "0.5",
    ];
    let run = deliver(&env, &tmux, &ws, &args);
    assert_eq!(code(&run), 1, "{}", stderr(&run));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fs::read(&busy_out).unwrap_or_default(), b"");
    assert_eq!(fs::read(&custom_out).unwrap_or_default(), b"");
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("TMUX", tmux.env_value())
        .env("BATON_CLAUDE_READY_MARKER", "READY>")
        .args(["resume", "--deliver", &format!("tmux:{custom}")])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(received(&custom_out, 10).starts_with(b"\x1b[200~```text"));
}

#[test]
fn without_tmux_delivery_is_not_found_and_a_bad_timeout_a_usage_error() {
    let (env, ws, _) = handoff();
    // A PATH with git (the comparison runs it) and no tmux.
    let bin = env.path().join("git-only");
    fs::create_dir_all(&bin).expect("mkdir");
    let git = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .expect("sh");
    let git = String::from_utf8_lossy(&git.stdout).trim().to_string();
    std::os::unix::fs::symlink(&git, bin.join("git")).expect("symlink");
    let run = env
        .cmd()
        .current_dir(&ws)
        .env("PATH", s(&bin))
        .args(["resume", "--deliver", "tmux:%1"])
        .output()
        .expect("run baton");
    assert_eq!(code(&run), 3, "{}", stderr(&run));
    assert!(
        stderr(&run).ends_with(
            "error: tmux is not on PATH: --deliver tmux:PANE runs it; install tmux, or start \
             the harness with --launch instead\n"
        ),
        "{}",
        stderr(&run)
    );
    let run = baton_in(
        &env,
        &ws,
        &["resume", "--deliver", "tmux:%1", "--deliver-timeout", "NaN"],
    );
    assert_eq!(code(&run), 2, "{}", stderr(&run));
    assert!(
        stderr(&run).contains("--deliver-timeout NaN"),
        "{}",
        stderr(&run)
    );
}
