//! Renaming a scanned tree before it is written: every entry name and symlink target put
//! through the caller's [`Names`] (the secret scan of `save DIR`, above the store), with
//! a rename that would merge two entries of one directory refused.

use std::path::{Path, PathBuf};

use super::Node;

/// What [`Node::rewrite_names`] asks of every entry name and symlink target (the secret
/// scan of `save DIR`, which lives above the store).
pub trait Names {
    /// The name of the entry at `path` (on disk): `Some` stores another name instead.
    fn name(&mut self, path: &Path, name: &str) -> Option<String>;
    /// The target of the symlink at `path`: `Some` stores another target instead.
    fn target(&mut self, path: &Path, target: &[u8]) -> Option<Vec<u8>>;
}

/// Two entries of one directory that [`Node::rewrite_names`] would store under one name.
#[derive(Debug)]
pub struct Collision {
    /// The directory, on disk.
    pub dir: PathBuf,
    /// The name both would have.
    pub name: String,
}

impl Node {
    /// Put every entry name and symlink target below this node through `names`, and keep
    /// each directory's entries in name order. A rewrite that gives two entries of one
    /// directory the same name is refused: one of them would be lost.
    pub fn rewrite_names(&mut self, names: &mut dyn Names) -> std::result::Result<(), Collision> {
        let Node::Dir { path, children } = self else {
            return Ok(());
        };
        let mut renamed = false;
        for (name, child) in children.iter_mut() {
            let at = path.join(name.as_str());
            if let Node::Symlink { target } = child
                && let Some(new) = names.target(&at, target)
            {
                *target = new;
            }
            child.rewrite_names(names)?;
            if let Some(new) = names.name(&at, name) {
                *name = new;
                renamed = true;
            }
        }
        if renamed {
            children.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(twins) = children.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Collision {
                    dir: path.clone(),
                    name: twins[0].0.clone(),
                });
            }
        }
        Ok(())
    }
}
