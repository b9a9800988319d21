//! The history of HEAD from what an earlier capture recorded: when the newest commits
//! (with their parents, from the `log` a capture runs anyway) lead back to the HEAD of a
//! capture whose root commits and first parents are known, those of the new HEAD follow
//! without asking git to walk the whole history again (two `rev-list` processes).

use std::collections::{HashMap, HashSet};

use super::history::FIRST_PARENTS_CAP;

/// The history of one commit as a capture recorded it: `head`, the parentless commits
/// reachable from it, and its first-parent ids, newest (`head` itself) first, at most
/// [`FIRST_PARENTS_CAP`]; kept in the store's history cache between handoffs. Commit ids
/// name their whole history, so these are facts about `head` wherever it is found.
pub use baton_store::history_cache::History as KnownHistory;

/// Whether `known` can be built on: a HEAD with at least one root, and first parents
/// that start at it (a capture whose reads failed recorded empty lists).
pub(super) fn usable(known: &KnownHistory) -> bool {
    !known.root_commits.is_empty() && known.first_parents.first() == Some(&known.head)
}

/// The root commits and first parents of `commits[0]` (HEAD), given the newest commits
/// with their parents (`git log` order: HEAD first) and `known`: when every commit
/// reachable from HEAD but not through `known.head` is among `commits` (each parent met
/// is either listed or `known.head`), reachable(HEAD) is those commits and
/// reachable(`known.head`), so with no parentless commit among them the roots are
/// `known`'s, and the first-parent chain runs through listed commits until it reaches
/// `known.head`, then continues as `known`'s. `None` when anything is missing or a new
/// root appears (a merge of unrelated histories: git gives the roots their order): the
/// caller asks git.
pub(super) fn derive(
    commits: &[(String, Vec<String>)],
    known: &KnownHistory,
) -> Option<(Vec<String>, Vec<String>)> {
    let (head, _) = commits.first()?;
    if !usable(known) {
        return None;
    }
    if *head == known.head {
        return Some((known.root_commits.clone(), known.first_parents.clone()));
    }
    let parents: HashMap<&str, &[String]> = commits
        .iter()
        .map(|(id, parents)| (id.as_str(), parents.as_slice()))
        .collect();
    // Walk from HEAD through listed commits; every parent must be listed or known.head.
    let mut seen: HashSet<&str> = HashSet::new();
    let mut todo: Vec<&str> = vec![head.as_str()];
    let mut reaches_known = false;
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        let of = parents.get(id)?;
        if of.is_empty() {
            // A merged history with a root of its own: git orders the roots.
            return None;
        }
        for parent in *of {
            if *parent == known.head {
                reaches_known = true;
            } else {
                todo.push(parent.as_str());
            }
        }
    }
    if !reaches_known {
        return None; // an unrelated HEAD: its history is not known's
    }
    let mut first_parents: Vec<String> = Vec::new();
    let mut at = head.as_str();
    loop {
        if at == known.head {
            first_parents.extend(known.first_parents.iter().cloned());
            break;
        }
        first_parents.push(at.to_string());
        match parents.get(at)?.first() {
            Some(parent) => at = parent.as_str(),
            None => break,
        }
        if first_parents.len() >= FIRST_PARENTS_CAP {
            break;
        }
    }
    first_parents.truncate(FIRST_PARENTS_CAP);
    Some((known.root_commits.clone(), first_parents))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, parents: &[&str]) -> (String, Vec<String>) {
        (
            id.to_string(),
            parents.iter().map(|p| p.to_string()).collect(),
        )
    }

    fn known(head: &str, roots: &[&str], first_parents: &[&str]) -> KnownHistory {
        KnownHistory {
            root: "/w".into(),
            head: head.into(),
            root_commits: roots.iter().map(|r| r.to_string()).collect(),
            first_parents: first_parents.iter().map(|r| r.to_string()).collect(),
        }
    }

    fn strings(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|r| r.to_string()).collect()
    }

    #[test]
    fn new_commits_on_top_extend_the_known_history() {
        let k = known("b", &["a"], &["b", "a"]);
        let commits = [c("d", &["c"]), c("c", &["b"]), c("b", &["a"])];
        assert_eq!(
            derive(&commits, &k),
            Some((strings(&["a"]), strings(&["d", "c", "b", "a"])))
        );
        // The same HEAD: the known history as it is.
        assert_eq!(
            derive(&[c("b", &["a"])], &k),
            Some((strings(&["a"]), strings(&["b", "a"])))
        );
    }

    #[test]
    fn a_merge_within_the_listing_is_followed() {
        // m merges x (a new line of work from b) into c; x's line is listed.
        let k = known("b", &["a"], &["b", "a"]);
        let commits = [c("m", &["c", "x"]), c("x", &["b"]), c("c", &["b"])];
        assert_eq!(
            derive(&commits, &k),
            Some((strings(&["a"]), strings(&["m", "c", "b", "a"])))
        );
        // A merged history with a root of its own, all listed: git orders the roots.
        let commits = [c("m", &["b", "y"]), c("y", &["r"]), c("r", &[])];
        assert_eq!(derive(&commits, &k), None);
    }

    #[test]
    fn anything_not_listed_or_not_linked_asks_git() {
        let k = known("b", &["a"], &["b", "a"]);
        // A merge of an older commit that is not listed.
        assert_eq!(derive(&[c("m", &["b", "old"])], &k), None);
        // More new commits than the listing holds.
        assert_eq!(derive(&[c("e", &["d"]), c("d", &["c"])], &k), None);
        // A rewritten history (a rebase, an amend) that no longer holds known.head.
        assert_eq!(derive(&[c("b2", &["a"]), c("a", &[])], &k), None);
        // A capture whose reads failed recorded nothing to build on.
        assert_eq!(derive(&[c("c", &["b"])], &known("b", &[], &[])), None);
        assert_eq!(derive(&[c("c", &["b"])], &known("b", &["a"], &["a"])), None);
        assert_eq!(derive(&[], &k), None);
    }

    #[test]
    fn first_parents_stay_capped() {
        let long: Vec<String> = (0..FIRST_PARENTS_CAP).map(|i| format!("p{i}")).collect();
        let k = KnownHistory {
            root: "/w".into(),
            head: "p0".into(),
            root_commits: strings(&["r"]),
            first_parents: long,
        };
        let (_, first_parents) = derive(&[c("n", &["p0"])], &k).unwrap();
        assert_eq!(first_parents.len(), FIRST_PARENTS_CAP);
        assert_eq!(first_parents[0], "n");
        assert_eq!(first_parents[1], "p0");
    }
}
