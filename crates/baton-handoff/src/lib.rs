//! The handoff layer: briefings, workspace evidence, secrets, kickoff and resume, import.
//!
//! It sits between the commands and the store: it turns a workspace and an agent's
//! briefing into the files of one bundle, and a bundle back into a kickoff for the next
//! agent. Nothing here ever changes the workspace.

pub mod briefing;
pub mod capture;
pub mod checkpoint;
pub mod compare;
pub mod context;
pub mod deliver;
pub mod events;
pub mod evidence;
pub mod export;
pub mod export_handoff;
pub mod hooks;
pub mod import;
pub mod kickoff;
pub mod merge;
pub mod pii;
pub mod repos;
pub mod resume;
pub mod save;
pub mod search;
pub mod secrets;
pub mod sessions;
pub mod skill;
pub mod transcript;
pub mod turns;
