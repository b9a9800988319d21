//! Export: bundles and everything below them, verified, into a tar file renamed into place.

use super::*;

/// Write `bundles` (the first is the archive's `current`) and everything below their
/// trees, plus with `history` every ancestor and the log, to the tar file `dest`.
pub fn export(
    store: &Store,
    bundles: &[ObjectId],
    history: bool,
    dest: &Path,
) -> Result<ExportReport> {
    let mut listed = Vec::new();
    for id in bundles {
        if !listed.contains(id) {
            listed.push(*id);
        }
    }
    let Some(current) = listed.first().copied() else {
        return Err(Error::usage("nothing to export: no revision given"));
    };
    let reach = if history {
        store.reachable(&listed)?
    } else {
        let mut reach = store.below(&listed)?;
        reach.objects.extend(listed.iter().copied());
        reach
    };
    // An archive that import would refuse is not written.
    if let Some((tree, depth)) = reach.deepest
        && depth > MAX_TREE_DEPTH
    {
        return Err(too_deep(&tree));
    }
    let objects: BTreeSet<ObjectId> = reach.objects.into_iter().collect();
    let log = if history {
        let path = store.root().join(baton_format::layout::LOG);
        let mut bytes = fsutil::read_limited(&path, MAX_LOG)?;
        // Only committed lines: a torn last line is an append that never happened.
        let committed = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(committed);
        Some(bytes)
    } else {
        None
    };
    let manifest = ArchiveManifest {
        format: FORMAT.into(),
        version: VERSION,
        bundles: listed.iter().map(|i| i.to_hex()).collect(),
        history,
        current: current.to_hex(),
    };
    let manifest_bytes = serde_json::to_vec(&manifest)
        .map_err(|e| Error::other(format!("cannot encode the archive manifest: {e}")))?;

    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = tempfile::Builder::new()
        .prefix(".baton-export-")
        .tempfile_in(&parent)
        .ctx("cannot create a temp file in", &parent)?;
    let mut spool = tempfile::tempfile_in(&parent).ctx("cannot create a temp file in", &parent)?;
    let mut builder = tar::Builder::new(io::BufWriter::new(temp));
    let mut report = ExportReport {
        file: dest.to_path_buf(),
        bundles: listed.clone(),
        current: Some(current),
        history,
        ..ExportReport::default()
    };
    let werr = |e: io::Error| Error::io("cannot write", dest, e);
    builder
        .append(
            &header(MANIFEST_NAME, manifest_bytes.len() as u64)?,
            &manifest_bytes[..],
        )
        .map_err(werr)?;
    for id in &objects {
        // Each object's stored bytes, checked on the way through, spooled so that the
        // header can carry their length.
        spool.set_len(0).map_err(werr)?;
        spool.seek(SeekFrom::Start(0)).map_err(werr)?;
        let len = {
            let mut sink = io::BufWriter::new(&mut spool);
            let len = store.objects.copy_stored_verified(id, &mut sink)?;
            sink.flush().map_err(werr)?;
            len
        };
        spool.seek(SeekFrom::Start(0)).map_err(werr)?;
        // The storage name: in an encrypted store the archive, like the store, does not
        // reveal which known files it holds.
        let name = format!("objects/{}", store.objects.name_of(id));
        builder
            .append(&header(&name, len)?, (&mut spool).take(len))
            .map_err(werr)?;
        report.objects += 1;
        report.object_bytes += len;
    }
    if let Some(log) = &log {
        builder
            .append(&header(LOG_NAME, log.len() as u64)?, &log[..])
            .map_err(werr)?;
        report.log_bytes = log.len() as u64;
    }
    let temp = builder
        .into_inner()
        .map_err(werr)?
        .into_inner()
        .map_err(|e| werr(e.into_error()))?;
    temp.as_file().sync_all().map_err(werr)?;
    report.bytes = temp.as_file().metadata().map_err(werr)?.len();
    temp.persist(dest)
        .map_err(|e| Error::io("cannot rename into", dest, e.error))?;
    fsutil::fsync_dir(&parent)?;
    Ok(report)
}

/// A regular-file header: fixed mode 0600, owner 0, mtime 0, so that the same objects
/// always give the same archive.
pub(super) fn header(name: &str, size: u64) -> Result<tar::Header> {
    let mut header = tar::Header::new_ustar();
    header
        .set_path(name)
        .map_err(|e| Error::other(format!("cannot name archive entry {name}: {e}")))?;
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o600);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_cksum();
    Ok(header)
}
