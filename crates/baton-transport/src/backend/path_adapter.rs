//! The path adapter: `Backend` and `BackendExt` for every path transport (`Pipelined`
//! over `Remote`: a local directory, SFTP). `format::layout` maps kinds to paths, and
//! atomic creation is a staging directory plus a no-clobber rename, all inside this file.
//! Each call the adapter makes on a path transport is a trace event (`trace.rs`), so no
//! wrapper re-forwards the transport's methods.

use std::io::Write;
use std::time::Instant;

use super::{
    Backend, BackendExt, Chain, Listing, NewItem, OpenTail, PendingReads, new_store_files,
    refuse_delete, staging_name,
};
use crate::{Pipelined, Published, Remote, RemoteEntry, Step, Upload, trace};
use baton_error::Result;
use baton_format::layout::{self, Kind};
use baton_store::leftovers;

/// Where a store file of `item` is staged.
fn store_staged(item: &NewItem, name: &str) -> String {
    format!("{}/store{name}", item.staging)
}

/// Run `f`, the call `call` on a path transport, and trace it (`trace::call`): `waited`
/// when it waits for its answer.
fn traced<R: Pipelined + ?Sized, T>(
    remote: &mut R,
    call: &'static str,
    waited: bool,
    what: impl FnOnce() -> String,
    f: impl FnOnce(&mut R) -> Result<T>,
) -> Result<T> {
    let t0 = Instant::now();
    let result = f(remote);
    trace::call(call, what, waited, t0, remote.round_trips(), &result);
    result
}

fn make_dirs<R: Pipelined + ?Sized>(remote: &mut R, dirs: &[String]) -> Result<()> {
    let what = || format!("make_dirs {dirs:?} (not waited for)");
    traced(remote, "make_dirs", false, what, |r| r.make_dirs(dirs))
}

fn prepare_publish<R: Pipelined + ?Sized>(remote: &mut R, dirs: &[String]) -> Result<()> {
    let what = || format!("prepare_publish {dirs:?} (not waited for)");
    traced(remote, "prepare_publish", false, what, |r| {
        r.prepare_publish(dirs)
    })
}

fn remove_dir_all<R: Pipelined + ?Sized>(remote: &mut R, dir: &str) -> Result<()> {
    let what = || format!("remove_dir_all {dir}");
    traced(remote, "remove_dir_all", true, what, |r| {
        r.remove_dir_all(dir)
    })
}

impl<T: Pipelined + ?Sized> Backend for T {
    fn describe(&self) -> String {
        Remote::describe(self)
    }

    fn read_and_list(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        let files: Vec<String> = reads.iter().map(|(k, n)| layout::path(k, n)).collect();
        let dirs: Vec<String> = lists.iter().map(Listing::rel).collect();
        let what = || format!("read_many {files:?} {dirs:?}");
        traced(self, "read_many", true, what, |r| {
            r.read_many(&files, &dirs, limit)
        })
    }

    fn read_range(&mut self, kind: &Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let path = layout::path(kind, name);
        let what = || format!("read_range {path} {offset}+{len}");
        traced(self, "read_range", true, what, |r| {
            Remote::read_range(r, &path, offset, len)
        })
    }

    fn read_sized(
        &mut self,
        kind: &Kind,
        name: &str,
        len: u64,
        sink: &mut dyn Write,
    ) -> Result<()> {
        let path = layout::path(kind, name);
        let what = || format!("read_file_sized {path} {len}");
        traced(self, "read_file_sized", true, what, |r| {
            r.read_file_sized(&path, len, sink)
        })
    }

    fn begin_new(&mut self, store: Option<Vec<u8>>) -> Result<NewItem> {
        if store.is_some() {
            let dirs: Vec<String> = std::iter::once("")
                .chain(layout::DIRS)
                .map(|d| d.to_string())
                .collect();
            make_dirs(self, &dirs)?;
            // The top directory too: its files are published with a directory fsync each.
            let publish_into = [
                String::new(),
                layout::dir(&Kind::Pack),
                layout::dir(&Kind::Generation(baton_format::names::RefName::Current)),
            ];
            prepare_publish(self, &publish_into)?;
        }
        let staging = layout::staging_dir(&staging_name());
        make_dirs(self, std::slice::from_ref(&staging))?;
        Ok(NewItem {
            staging,
            store: store.map(new_store_files).unwrap_or_default(),
        })
    }

    fn upload_with(
        &mut self,
        item: &NewItem,
        beside: &[(String, Vec<u8>)],
    ) -> Result<Box<dyn Upload + '_>> {
        let beside: Vec<(String, Vec<u8>)> = beside
            .iter()
            .map(|(n, b)| (format!("{}/{n}", item.staging), b.clone()))
            .chain(
                item.store
                    .iter()
                    .map(|(n, b)| (store_staged(item, n), b.clone())),
            )
            .collect();
        let path = format!("{}/item", item.staging);
        if !trace::enabled() {
            return self.create_with(&path, &beside);
        }
        let t0 = Instant::now();
        let r = self.create_with(&path, &beside);
        let names: Vec<&String> = beside.iter().map(|(n, _)| n).collect();
        tracing::debug!(
            target: trace::TARGET,
            kind = "upload",
            call = "create",
            what = %format_args!("create {path} beside {names:?}"),
            ms = trace::ms(t0),
            waited = true,
            error = r.is_err()
        );
        Ok(Box::new(trace::TracedUpload { inner: r?, path }))
    }

    fn publish_chain(
        &mut self,
        item: &NewItem,
        kind: &Kind,
        name: &str,
        (staged, then_kind, then_name): (&str, &Kind, &str),
    ) -> Result<Chain> {
        // A store's small files first, `config` last of them (each may exist already:
        // a half-made store, or a twin creating it at the same time).
        let mut steps: Vec<Step> = item
            .store
            .iter()
            .map(|(n, _)| Step::Rename {
                from: store_staged(item, n),
                to: n.clone(),
                sync: true,
            })
            .collect();
        let first = steps.len();
        // Each step of the chain fails when the one before did, so it stops at a failure
        // although every request is sent at once: the item moved away is what lets
        // `item` be made a directory, only a directory takes the small item in, and only
        // from there is it published.
        let at = format!("{}/item", item.staging);
        steps.extend([
            Step::Rename {
                from: at.clone(),
                to: layout::path(kind, name),
                sync: true,
            },
            Step::MkDir(at.clone()),
            Step::Rename {
                from: format!("{}/{staged}", item.staging),
                to: format!("{at}/{staged}"),
                sync: false,
            },
            Step::Rename {
                from: format!("{at}/{staged}"),
                to: layout::path(then_kind, then_name),
                sync: true,
            },
            // Emptied by the steps before when they all went through: removed in the same
            // batch, whose replies are waited for anyway. Removals sent after it and not
            // waited for were sometimes lost when the client hung up right after sending
            // them, leaving the staging directory for a later push to sweep.
            Step::RmDir(at.clone()),
            Step::RmDir(item.staging.clone()),
        ]);
        let what = || format!("run_in_order {steps:?}");
        let done = traced(self, "run_in_order", true, what, |r| r.run_in_order(&steps))?;
        let outcome = |ok: bool| {
            if ok {
                Published::Done
            } else {
                Published::Exists
            }
        };
        Ok(Chain {
            store: (first > 0).then(|| outcome(done[first - 1])),
            item: outcome(done[first]),
            then: outcome(done[first] && done[first + 3]),
        })
    }

    fn publish_beside(
        &mut self,
        item: &NewItem,
        staged: &str,
        kind: &Kind,
        name: &str,
    ) -> Result<Published> {
        let moves = [(
            format!("{}/{staged}", item.staging),
            layout::path(kind, name),
        )];
        let what = || format!("publish {moves:?}");
        let mut outcomes = traced(self, "publish", true, what, |r| r.publish_many(&moves))?;
        Ok(outcomes.pop().unwrap_or(Published::Done))
    }

    fn publish_item(&mut self, item: &NewItem, kind: &Kind, name: &str) -> Result<Published> {
        // Staged where `upload_with` wrote it; the rename is fsynced with its directory.
        self.publish_beside(item, "item", kind, name)
    }

    fn close_new(&mut self, item: NewItem, all: bool) {
        // A chain that went through whole removed its staging directory in its own last
        // steps; what is left of one that did not goes here.
        if !all {
            let _ = remove_dir_all(self, &item.staging);
        }
    }

    fn delete(&mut self, kind: &Kind, name: &str) -> Result<bool> {
        match kind {
            Kind::Pack | Kind::Loose => {
                let path = layout::path(kind, name);
                let what = || format!("remove_file {path}");
                traced(self, "remove_file", true, what, |r| r.remove_file(&path))
            }
            Kind::Config | Kind::Log | Kind::Generation(_) => refuse_delete(kind, name),
        }
    }
}

impl<T: Pipelined + ?Sized> BackendExt for T {
    fn start_reads(
        &mut self,
        reads: &[(Kind, String)],
        lists: &[Listing],
        limit: u64,
    ) -> Result<PendingReads> {
        let files: Vec<String> = reads.iter().map(|(k, n)| layout::path(k, n)).collect();
        let dirs: Vec<String> = lists.iter().map(Listing::rel).collect();
        let what = || format!("start_reads {files:?} {dirs:?} (not waited for)");
        let token = traced(self, "start_reads", false, what, |r| {
            Pipelined::start_reads(r, &files, &dirs, limit)
        })?;
        Ok(PendingReads {
            reads: reads.to_vec(),
            lists: lists.to_vec(),
            limit,
            token,
        })
    }

    fn collect_reads(
        &mut self,
        pending: PendingReads,
    ) -> Result<(Vec<Option<Vec<u8>>>, Vec<Option<Vec<RemoteEntry>>>)> {
        match pending.token {
            Some(token) => traced(
                self,
                "collect_reads",
                true,
                || "collect_reads".into(),
                |r| Pipelined::collect_reads(r, token),
            ),
            None => self.read_and_list(&pending.reads, &pending.lists, pending.limit),
        }
    }

    fn open_tail(
        &mut self,
        kind: &Kind,
        name: &str,
        size: u64,
        tail_len: u64,
        body: bool,
    ) -> Result<OpenTail> {
        let path = layout::path(kind, name);
        let what = || {
            let body = if body { " and the body" } else { "" };
            format!("open_tail {path} {size} (last {tail_len}{body})")
        };
        let (tail, token) = traced(self, "open_tail", true, what, |r| {
            Pipelined::open_tail(r, &path, size, tail_len, body)
        })?;
        Ok(OpenTail {
            kind: kind.clone(),
            name: name.to_string(),
            size,
            tail,
            token,
        })
    }

    fn read_before_tail(&mut self, item: &OpenTail, offset: u64, len: u64) -> Result<Vec<u8>> {
        let path = layout::path(&item.kind, &item.name);
        let what = || format!("read_open {path} {offset}+{len}");
        traced(self, "read_open", true, what, |r| {
            Pipelined::read_open(r, item.token, &path, offset, len)
        })
    }

    fn read_rest(&mut self, item: OpenTail, sink: &mut dyn Write) -> Result<()> {
        let path = layout::path(&item.kind, &item.name);
        // A kept open streams on (the transport counts its own round trips); without one
        // the file is read again, a call that waits.
        let what = || format!("read_rest {path} {}", item.size);
        traced(self, "read_rest", item.token.is_none(), what, |r| {
            Pipelined::read_rest(r, item.token, &path, item.size, &item.tail, sink)
        })
    }

    fn close_tail(&mut self, item: OpenTail) {
        let path = layout::path(&item.kind, &item.name);
        let what = || format!("close_tail {path} (not waited for)");
        let _ = traced(self, "close_tail", false, what, |r| {
            Pipelined::close_tail(r, item.token, &path);
            Ok(())
        });
    }

    fn expect_tails(&mut self, kind: &Kind, items: &[(String, u64, u64, bool)]) {
        let files: Vec<(String, u64, u64, bool)> = items
            .iter()
            .map(|(name, size, tail, body)| (layout::path(kind, name), *size, *tail, *body))
            .collect();
        let what = || format!("expect_tails of {} files (not waited for)", files.len());
        let _ = traced(self, "expect_tails", false, what, |r| {
            Pipelined::expect_tails(r, &files);
            Ok(())
        });
    }

    fn prepare(&mut self, kinds: &[Kind]) -> Result<()> {
        let dirs: Vec<String> = kinds
            .iter()
            .map(layout::dir)
            .filter(|d| !d.is_empty())
            .collect();
        // Directories first: SFTP sends the requests in order, and opens them next.
        let mut all = dirs.clone();
        all.push(layout::STAGING.to_string());
        make_dirs(self, &all)?;
        prepare_publish(self, &dirs)
    }

    fn prepare_in_existing_dirs(&mut self, kinds: &[Kind]) -> Result<()> {
        let dirs: Vec<String> = kinds
            .iter()
            .map(layout::dir)
            .filter(|d| !d.is_empty())
            .collect();
        prepare_publish(self, &dirs)
    }

    fn abandon(&mut self, item: NewItem) {
        self.forget_prepared();
        let _ = remove_dir_all(self, &item.staging);
    }

    fn sweep_leftovers(&mut self, listed: &[RemoteEntry]) {
        let sweep = leftovers::RemoteSweep::now();
        for entry in listed {
            if entry.is_dir && sweep.removable(&entry.name, entry.mtime) {
                let _ = remove_dir_all(self, &layout::staging_dir(&entry.name));
            }
        }
    }
}
