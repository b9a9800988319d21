//! The agent-written briefing, `handoff.md`: normalizing what an agent produced and
//! refusing a briefing that lacks the sections the next agent needs.
//!
//! Agents answer in chat style, so the raw text often carries a preamble ("Sure! Here is
//! the handoff:"), a code fence around the whole document, a BOM or CRLF line ends. These
//! are stripped so that the stored briefing is the document itself, and so that two
//! briefings differing only in that noise store as the same bytes.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use serde::Serialize;

use baton_error::{Error, Result};

/// Sections every briefing must have, non-empty.
pub const REQUIRED_SECTIONS: [&str; 3] = ["Objective", "Current State", "Next Steps"];

/// Sections a briefing may have; they, and any other `##` section, are kept in order.
pub const OPTIONAL_SECTIONS: [&str; 4] = [
    "What Has Been Done",
    "Open Questions",
    "Risks / Watch Out",
    "Suggested Prompt For Next Agent",
];

/// Longest `summary_line`, in characters.
const SUMMARY_MAX_CHARS: usize = 120;

/// A normalized, validated briefing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Briefing {
    /// The whole normalized document, ending in exactly one newline.
    pub text: String,
    /// Every level-2 section in document order, required, optional or other.
    pub sections: Vec<Section>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Section {
    /// The heading text without `##` and without a trailing colon.
    pub title: String,
    /// Everything up to the next level-1 or level-2 heading, without surrounding blank
    /// lines.
    pub body: String,
}

impl Briefing {
    /// Normalize `raw` and check that the required sections are there and non-empty.
    pub fn parse(raw: &str) -> Result<Briefing> {
        let text = normalize(raw);
        if text.trim().is_empty() {
            return Err(invalid(format!(
                "briefing is empty; it needs sections: {}",
                REQUIRED_SECTIONS.map(|t| format!("## {t}")).join(", ")
            )));
        }
        let sections = sections(&text);
        let mut problems = Vec::new();
        for required in REQUIRED_SECTIONS {
            match find(&sections, required) {
                None => problems.push(match wrong_level(&text, required) {
                    Some(found) => format!("## {required} (found `{found}`: use `## {required}`)"),
                    None => format!("## {required}"),
                }),
                Some(s) if s.body.trim().is_empty() => {
                    problems.push(format!("## {required} (empty)"))
                }
                Some(_) => {}
            }
        }
        if !problems.is_empty() {
            return Err(invalid(format!(
                "briefing is missing sections: {}",
                problems.join(", ")
            )));
        }
        Ok(Briefing { text, sections })
    }

    /// The body of the first section titled `title`, ignoring case, spacing, punctuation
    /// and a trailing colon (`"risks/watch out"` finds `## Risks / Watch Out:`).
    pub fn section(&self, title: &str) -> Option<&str> {
        section_in(&self.sections, title)
    }

    /// The first sentence (or line) of the Objective as plain text, at most 120 characters:
    /// the bundle manifest's one-line summary.
    pub fn summary_line(&self) -> String {
        let body = self.section("Objective").unwrap_or_default();
        let line = body
            .lines()
            .map(plain_line)
            .find(|l| !l.is_empty())
            .unwrap_or_default();
        shorten(first_sentence(&line), SUMMARY_MAX_CHARS)
    }
}

/// The level-2 sections of any markdown document (an imported handoff's own file, which
/// need not be a valid briefing), normalized and found as a briefing's are.
pub fn sections_of(text: &str) -> Vec<Section> {
    sections(&normalize(text))
}

/// The body of the first of `sections` titled `title`, matched as [`Briefing::section`]
/// matches.
pub fn section_in<'a>(sections: &'a [Section], title: &str) -> Option<&'a str> {
    find(sections, title).map(|s| s.body.as_str())
}

/// `all` without the first section of each title in `placed` (matched as
/// [`Briefing::section`] matches titles): what is left when those are shown by name, in
/// document order.
pub fn others<'a>(all: &'a [Section], placed: &[&str]) -> Vec<&'a Section> {
    let mut unplaced: Vec<String> = placed.iter().map(|t| title_key(t)).collect();
    all.iter()
        .filter(|s| {
            let key = title_key(&s.title);
            match unplaced.iter().position(|k| *k == key) {
                Some(i) => {
                    unplaced.swap_remove(i);
                    false
                }
                None => true,
            }
        })
        .collect()
}

/// A valid briefing with the required sections and short prompts, for `baton` to offer
/// when an agent has none or wrote an invalid one.
pub fn skeleton() -> &'static str {
    "# Handoff

## Objective

What this work is for, in one or two sentences, and what \"done\" looks like.

## Current State

Where things stand: what works, what is broken, what is not committed yet.

## Next Steps

1. The first concrete thing the next agent should do.
"
}

/// A heading titled `title` at another level than 2 (`# Objective`, `### Objective`):
/// the line as written, for the hint that names the fix.
fn wrong_level(text: &str, title: &str) -> Option<String> {
    let key = title_key(title);
    text.lines()
        .filter(|l| is_heading(l))
        .map(str::trim)
        .find(|l| {
            let hashes = l.chars().take_while(|&c| c == '#').count();
            hashes != 2 && title_key(l[hashes..].trim().trim_end_matches(':')) == key
        })
        .map(str::to_string)
}

pub fn invalid(message: String) -> Error {
    // The hint spans several lines (it holds the skeleton); the message stays on one line
    // because the CLI prints the message first and the hint after it.
    Error::usage(message).with_hint(skeleton_hint())
}

/// The hint of every refused or missing briefing: the skeleton as a shell heredoc, which
/// an agent can run as printed after filling it in (`--brief -` reads stdin).
pub fn skeleton_hint() -> String {
    format!(
        "write the briefing as markdown with these '## ' sections, for example (--brief - \
         reads it from stdin):\n\nbaton handoff --to AGENT --brief - <<'EOF'\n{}EOF\n",
        skeleton()
    )
}

/// `baton handoff` given neither `--brief` nor `--no-brief`: the one-line error, and the
/// skeleton in the hint, as for a refused briefing.
pub fn missing() -> Error {
    invalid(
        "a handoff needs a briefing: --brief FILE (or --brief - for stdin), or --no-brief for \
         workspace evidence only"
            .into(),
    )
}

fn title_key(title: &str) -> String {
    title
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

fn find<'a>(sections: &'a [Section], title: &str) -> Option<&'a Section> {
    let key = title_key(title);
    sections.iter().find(|s| title_key(&s.title) == key)
}

/// Strip the BOM, line-end variants, chat preamble and a wrapping fence; trim trailing
/// whitespace from every line; end with exactly one newline (or be empty).
fn normalize(raw: &str) -> String {
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
    let unified = raw.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = unified.split('\n').map(str::trim_end).collect();
    let kept = document_lines(&lines);
    let end = kept
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    let start = kept[..end]
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(end);
    if start == end {
        return String::new();
    }
    let mut text = kept[start..end].join("\n");
    text.push('\n');
    text
}

/// The lines of the document proper: from the first heading that is not inside a code
/// block, or the inside of a fence wrapping the whole document. Without any heading the
/// text is kept whole, and validation will say what is missing.
fn document_lines<'a, 'b>(lines: &'b [&'a str]) -> &'b [&'a str] {
    let mut i = 0;
    while i < lines.len() {
        if is_heading(lines[i]) {
            return &lines[i..];
        }
        if let Some(open) = fence(lines[i]) {
            if let Some(inner) = wrapped(lines, i, open) {
                return inner;
            }
            // A code block in the preamble: a `# comment` inside it is no heading.
            let close = lines[i + 1..]
                .iter()
                .position(|l| fence(l).is_some_and(|f| f.closes(open)));
            i = close.map_or(lines.len(), |c| i + 1 + c + 1);
            continue;
        }
        i += 1;
    }
    lines
}

/// If the fence opened at `lines[at]` wraps the document, the lines inside it.
///
/// It wraps when it is a plain or markdown fence whose first non-blank line is a heading.
/// Agents nest code blocks inside it without lengthening its fence, so a bare fence line
/// may close it or open an inner block; it closes at the last such line after which no
/// heading follows (the rest is chat postamble), and a fence line that can only close an
/// inner block never closes it. Without a closing line it runs to the end (a cut-off
/// answer).
fn wrapped<'a, 'b>(lines: &'b [&'a str], at: usize, open: Fence<'a>) -> Option<&'b [&'a str]> {
    let info = open.info.to_ascii_lowercase();
    if !matches!(info.as_str(), "" | "markdown" | "md") {
        return None;
    }
    let rest = &lines[at + 1..];
    let first = rest.iter().find(|l| !l.is_empty())?;
    if !is_heading(first) {
        return None;
    }
    let mut inner: Option<Fence> = None;
    let mut close = None;
    for (j, line) in rest.iter().enumerate() {
        match (fence(line), inner) {
            (Some(f), Some(o)) if f.closes(o) => inner = None,
            (Some(f), None) => {
                if f.closes(open) {
                    close = Some(j);
                }
                inner = Some(f);
            }
            (None, None) if is_heading(line) => close = None,
            _ => {}
        }
    }
    Some(match close {
        Some(c) => &rest[..c],
        None => rest,
    })
}

#[derive(Clone, Copy)]
struct Fence<'a> {
    ch: u8,
    len: usize,
    info: &'a str,
}

impl Fence<'_> {
    fn closes(self, open: Fence<'_>) -> bool {
        self.ch == open.ch && self.len >= open.len && self.info.is_empty()
    }
}

/// A CommonMark fence line: up to three spaces, then three or more backticks or tildes.
fn fence(line: &str) -> Option<Fence<'_>> {
    let body = strip_indent(line)?;
    let ch = *body.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = body.bytes().take_while(|&b| b == ch).count();
    if len < 3 {
        return None;
    }
    let info = body[len..].trim();
    if ch == b'`' && info.contains('`') {
        return None;
    }
    Some(Fence { ch, len, info })
}

/// An ATX heading line: up to three spaces, one to six `#`, then a space or the end.
fn is_heading(line: &str) -> bool {
    let Some(body) = strip_indent(line) else {
        return false;
    };
    let hashes = body.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && matches!(body.as_bytes().get(hashes), None | Some(b' ' | b'\t'))
}

fn strip_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|&b| b == b' ').count();
    (spaces <= 3).then(|| &line[spaces..])
}

/// The level-2 sections, found with a markdown parser so that a `## ` line inside a code
/// block, a list or a quote is body text, not a heading.
fn sections(text: &str) -> Vec<Section> {
    struct Mark {
        level: HeadingLevel,
        line_start: usize,
        body_start: usize,
        title: String,
    }
    let mut marks: Vec<Mark> = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<Mark> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let line_start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
                // Setext headings (a line underlined with `---`) are left as body text:
                // an agent's horizontal rule under a paragraph is not a new section.
                let atx = text[line_start..].trim_start().starts_with('#');
                if depth == 0 && atx && matches!(level, HeadingLevel::H1 | HeadingLevel::H2) {
                    let body_start = text[range.start..]
                        .find('\n')
                        .map_or(text.len(), |i| range.start + i + 1);
                    current = Some(Mark {
                        level,
                        line_start,
                        body_start,
                        title: String::new(),
                    });
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(mark) = current.take() {
                    marks.push(mark);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(mark) = current.as_mut() {
                    mark.title.push_str(&t);
                }
            }
            Event::Start(
                Tag::BlockQuote(_) | Tag::List(_) | Tag::Item | Tag::FootnoteDefinition(_),
            ) => depth += 1,
            Event::End(
                TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item | TagEnd::FootnoteDefinition,
            ) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }

    let mut out = Vec::new();
    for (i, mark) in marks.iter().enumerate() {
        if mark.level != HeadingLevel::H2 {
            continue;
        }
        let end = marks.get(i + 1).map_or(text.len(), |next| next.line_start);
        let body = text[mark.body_start.min(end)..end]
            .trim_end()
            .trim_start_matches('\n');
        let title = mark.title.trim();
        let title = title.strip_suffix(':').unwrap_or(title).trim_end();
        out.push(Section {
            title: title.to_string(),
            body: body.to_string(),
        });
    }
    out
}

/// A line as plain text: no list or quote marker, no heading hashes, no bold markers,
/// single spaces. A fence line has no text.
fn plain_line(line: &str) -> String {
    let mut l = line.trim();
    if fence(l).is_some() {
        return String::new();
    }
    loop {
        let before = l;
        l = l.trim_start_matches(['>', '#']).trim_start();
        for marker in ["- ", "* ", "+ "] {
            l = l.strip_prefix(marker).unwrap_or(l).trim_start();
        }
        let digits = l.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && matches!(l.as_bytes().get(digits), Some(b'.' | b')')) {
            let rest = &l[digits + 1..];
            if rest.is_empty() || rest.starts_with(' ') {
                l = rest.trim_start();
            }
        }
        if l == before {
            break;
        }
    }
    l.replace("**", "")
        .replace("__", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Up to and including the first `.`, `!` or `?` that ends a sentence.
fn first_sentence(line: &str) -> &str {
    const ABBREVIATIONS: [&str; 6] = ["e.g", "i.e", "etc", "vs", "cf", "approx"];
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        if !chars.get(k + 1).is_some_and(|(_, n)| n.is_whitespace()) {
            continue;
        }
        let word_start = line[..i].rfind(' ').map_or(0, |s| s + 1);
        let word = line[word_start..i].to_ascii_lowercase();
        if c == '.' && ABBREVIATIONS.contains(&word.as_str()) {
            continue;
        }
        return &line[..i + c.len_utf8()];
    }
    line
}

/// At most `max` characters; a longer text is cut at a word boundary when one is near and
/// ends in `…`.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(space) if cut[..space].chars().count() >= max / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests;
