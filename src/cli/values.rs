//! The CLI's mirrors of the handoff layer's option enums: clap derives live here, so the
//! layers below need no clap; each parser maps the mirror onto the library type.
//!
//! The variant names and doc comments are what `--help`, completions and the man page
//! show: keep them as the library enums' own.

use clap::ValueEnum;
use clap::builder::{EnumValueParser, MapValueParser, TypedValueParser};

use baton_handoff::{capture, deliver, events, export, pii, skill};

/// A value parser that reads the mirror `M` and yields the library type `T`.
type Mirrored<M, T> = MapValueParser<EnumValueParser<M>, fn(M) -> T>;

fn mirrored<M, T>() -> Mirrored<M, T>
where
    M: ValueEnum + Clone + Send + Sync + 'static,
    T: From<M> + Clone + Send + Sync + 'static,
{
    EnumValueParser::<M>::new().map(T::from as fn(M) -> T)
}

macro_rules! mirror {
    ($parser:ident, $mirror:ident => $target:path { $($variant:ident),* $(,)? }) => {
        impl From<$mirror> for $target {
            fn from(value: $mirror) -> Self {
                match value {
                    $($mirror::$variant => <$target>::$variant,)*
                }
            }
        }

        pub fn $parser() -> Mirrored<$mirror, $target> {
            mirrored()
        }
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SecretsMode {
    /// Replace each secret by a typed placeholder and report kinds and counts.
    Redact,
    /// Refuse the save if any secret is found.
    Block,
    /// Store secrets as they are and report them (directory snapshots only).
    Allow,
}
mirror!(secrets_mode, SecretsMode => capture::SecretsMode { Redact, Block, Allow });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PiiMode {
    /// Replace each item by a typed placeholder and report kinds and counts.
    Redact,
    /// Store personal data as it is, and report kinds and counts.
    Allow,
}
mirror!(pii_mode, PiiMode => pii::PiiMode { Redact, Allow });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    User,
    Assistant,
    /// The output of a tool, as the harness fed it back to the model.
    Tool,
    System,
}
mirror!(role, Role => events::Role { User, Assistant, Tool, System });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Kind {
    Message,
    ToolCall,
    ToolResult,
    /// A readable reasoning summary (encrypted reasoning is never kept).
    Reasoning,
    /// Session notes the harness wrote itself: summaries, compactions, and user entries
    /// the harness injected (command output, task notifications): never a turn.
    System,
    /// A content block of a type this baton does not know: `harness_type` names it, `text`
    /// holds any text it carried (store-format/TRANSCRIPT.md, "Unknown entries").
    Other,
}
mirror!(kind, Kind => events::Kind { Message, ToolCall, ToolResult, Reasoning, System, Other });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Harness {
    ClaudeCode,
    Codex,
}
mirror!(harness, Harness => skill::Harness { ClaudeCode, Codex });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// The user's own configuration, for every project.
    User,
    /// This project only (the top of the git work tree, else the current directory).
    Project,
}
mirror!(scope, Scope => skill::Scope { User, Project });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Frontmatter,
    Prowl,
}
mirror!(export_format, ExportFormat => export::ExportFormat { Frontmatter, Prowl });

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReceivingHarness {
    /// Claude Code (`claude`).
    Claude,
    /// Codex CLI (`codex`).
    Codex,
}
mirror!(receiving_harness, ReceivingHarness => deliver::Harness { Claude, Codex });

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mirror spells its values as the library type names them, so the CLI accepts
    /// exactly the names the rest of baton prints and parses.
    #[test]
    fn mirrors_name_values_as_the_library_does() {
        fn names<M: ValueEnum>() -> Vec<String> {
            M::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value())
                .map(|p| p.get_name().to_owned())
                .collect()
        }
        let lib = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            names::<SecretsMode>(),
            lib(capture::SecretsMode::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<PiiMode>(),
            lib(pii::PiiMode::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<Role>(),
            lib(events::Role::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<Kind>(),
            lib(events::Kind::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<Harness>(),
            lib(skill::Harness::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<ReceivingHarness>(),
            lib(deliver::Harness::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<Scope>(),
            lib(skill::Scope::ALL.map(|m| m.name()).to_vec())
        );
        assert_eq!(
            names::<ExportFormat>(),
            lib(export::ExportFormat::ALL.map(|m| m.name()).to_vec())
        );
    }
}
