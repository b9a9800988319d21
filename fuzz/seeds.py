#!/usr/bin/env python3
"""Generate seed corpora for the fuzz targets into fuzz/corpus/TARGET/.

Sources: store-format/vectors/*.json, fixtures/import/, and a small store, its files and
its tar exports made with the built baton binary ($BATON, else target/debug/baton or
target/release/baton). Run from anywhere: paths are relative to this file.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
REPO = FUZZ.parent
VECTORS = REPO / "store-format" / "vectors"
FIXTURES = REPO / "fixtures" / "import"
CORPUS = FUZZ / "corpus"

counts = {}


def seed(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)
    counts[target] = counts.get(target, 0) + 1


def load(name):
    return json.loads((VECTORS / name).read_text())


def from_vectors():
    for v in load("trees.json")["vectors"]:
        seed("format_objects", v["canonical"])
        seed("format_objects", v["id"])
    for v in load("bundles.json")["vectors"]:
        seed("format_objects", v["canonical"])
    inv = load("invalid.json")
    for group in ("trees", "bundles"):
        for v in inv[group]:
            seed("format_objects", bytes.fromhex(v["bytes_hex"]) if "bytes_hex" in v else v["bytes"])
    for v in inv["log_lines"]:
        seed("log_refs", v["line"])
    times = load("times.json")
    for group in ("valid", "invalid"):
        for v in times[group]:
            seed("format_objects", v["text"])
    for v in load("blobs.json")["vectors"]:
        seed("format_objects", v["id"])
    for v in load("objects.json")["vectors"]:
        seed("stored_object", bytes.fromhex(v["file_hex"]))
    packs = load("packs.json")
    for group in ("valid", "invalid", "corrupt_objects"):
        for v in packs[group]:
            seed("pack_index", bytes.fromhex(v["pack_hex"]))
    for v in packs["valid"]:
        seed("pack_index", v["id"] + ".pack")
    for v in load("log.json")["vectors"]:
        seed("log_refs", v["line"])
        seed("log_refs", v["line"] + "\n" + v["line"] + "\n")
    refs = load("refs.json")
    for group in ("valid", "invalid"):
        for v in refs["generation_files"][group]:
            seed("log_refs", v["file"])
        for v in refs["ref_names"][group]:
            seed("log_refs", v["ref"])
    for d in refs["ref_dirs"]:
        for f in d["files"]:
            seed("log_refs", f["content"])
    cfg = load("config.json")
    seed("store_config", cfg["written"])
    seed("store_config", cfg["written_with_target"])
    for group in ("accept", "reject"):
        for v in cfg[group]:
            seed("store_config", v["bytes"])


URLS = [
    "ssh://me@box:2222/srv/b", "ssh://box/~/work/.baton", "me@box:work", "box:/abs",
    "/mnt/disk/s", "file:///mnt/x%20y", "ssh://h/a%20b", "ssh://[::1]:22/p",
    "ssh://u:secret@host/p", "http://host/p", "host:", "ssh://host/p?q=1", "file://localhost/p",
    "ssh://host:0/x", "ssh://@host/x", "-oProxyCommand=x:p", "ssh://h/%ff", "ssh://h/~",
]
REVS = ["current", "current~", "current~1", "current~2", "current~3", "current~007",
        "targets/origin", "targets/x~1", "0123abcd", "deadbeefdeadbeef", "~", "current~-1"]


def from_fixtures():
    for u in URLS + REVS:
        seed("url_rev", u)
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.suffix == ".md":
            seed("briefing_transcript", path.read_bytes())
        if path.is_file() and path.suffix == ".jsonl":
            body = path.read_bytes()
            seed("briefing_transcript", b"\n" + body)
            seed("briefing_transcript", b"test fail\n" + body)
    # One handoff_import seed per fixture layout directory, in the target's
    # `%%% PATH` container format.
    layouts = [p for p in sorted(FIXTURES.iterdir()) if p.is_dir() and p.name != "bad"]
    layouts += [p for p in sorted((FIXTURES / "bad").iterdir()) if p.is_dir()]
    for layout in layouts:
        parts = []
        for f in sorted(layout.rglob("*")):
            if f.is_file():
                rel = f.relative_to(layout).as_posix()
                parts.append(b"%%% " + rel.encode() + b"\n" + f.read_bytes())
        seed("handoff_import", b"\n".join(parts))
        for f in sorted(layout.glob("*.md")):
            seed("handoff_import", f.read_bytes())


def sftp_packets():
    def s(b):
        if isinstance(b, str):
            b = b.encode()
        return struct.pack(">I", len(b)) + b

    attrs = struct.pack(">I", 0x0F) + struct.pack(">Q", 1234) + struct.pack(">II", 0, 0) \
        + struct.pack(">I", 0o100600) + struct.pack(">II", 1, 2)
    pkts = [
        bytes([2]) + struct.pack(">I", 3) + s("fsync@openssh.com") + s("1"),
        bytes([101]) + struct.pack(">II", 7, 0) + s("Success") + s("en"),
        bytes([101]) + struct.pack(">II", 8, 2) + s("No such file") + s(""),
        bytes([102]) + struct.pack(">I", 9) + s(b"\x00\x00\x00\x01"),
        bytes([103]) + struct.pack(">I", 10) + s(b"hello\n"),
        bytes([104]) + struct.pack(">II", 11, 1) + s("a") + s("-rw------- a") + attrs,
        bytes([105]) + struct.pack(">I", 12) + attrs,
        bytes([201]) + struct.pack(">I", 13) + b"extra",
    ]
    for p in pkts:
        seed("sftp_packet", p)


def sftp_sessions():
    # What an in-memory server said to the target's operations (recorded by the unit test
    # the_fuzz_entry_point_replays_a_recorded_server), whole, cut short, and reversed
    # frame by frame; and a server that has none of the files.
    recorded = (FUZZ / "seeds" / "sftp_session.bin").read_bytes()
    frames, at = [], 0
    while at + 4 <= len(recorded):
        n = struct.unpack(">I", recorded[at:at + 4])[0]
        frames.append(recorded[at:at + 4 + n])
        at += 4 + n
    seed("sftp_session", recorded)
    seed("sftp_session", recorded[: len(recorded) // 2])
    seed("sftp_session", b"".join(reversed(frames)))

    def status(i, code):
        body = bytes([101]) + struct.pack(">II", i, code) + struct.pack(">I", 0) + struct.pack(">I", 0)
        return struct.pack(">I", len(body)) + body

    seed("sftp_session", b"".join(status(i, 2) for i in range(2, 20)))
    seed("sftp_session", b"".join(status(i, 4) for i in range(2, 20)))


def beneath_walks():
    # Ops of fuzzing::walk: (0 mkdir | 1 file | 2 symlink TARGET | 3 cd | 4 cd / | 5 query
    # LEN PARTS...) NAME. A dir with a file, a symlink to outside beside it, paths through
    # both, `..` and an absolute one.
    seed("beneath_walk", bytes([0, 0, 3, 0, 1, 1, 2, 2, 0, 4, 0, 2, 1, 1, 5, 0, 3, 0, 0, 0, 1]))
    seed("beneath_walk", bytes([2, 0, 0, 5, 0, 2, 0, 0, 0, 1, 5, 0, 1, 6, 5, 0, 2, 5, 0, 0]))
    seed("beneath_walk", bytes([0, 0, 3, 0, 0, 1, 3, 1, 2, 2, 3, 4, 0, 5, 0, 4, 0, 0, 0, 1, 0, 2, 0, 3]))


def baton_binary():
    env = os.environ.get("BATON")
    if env:
        return env
    for p in (REPO / "target" / "debug" / "baton", REPO / "target" / "release" / "baton"):
        if p.exists():
            return str(p)
    sys.exit("no baton binary: build it (cargo build) or set BATON")


def from_store():
    baton = baton_binary()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = tmp / "s"

        def run(*args):
            subprocess.run([baton, "--store", str(store), "-q", *args], check=True,
                           cwd=tmp, stdout=subprocess.DEVNULL)

        run("init")
        work = tmp / "w"
        (work / "sub").mkdir(parents=True)
        (work / "a").write_text("hello\n")
        (work / "sub" / "b").write_text("x" * 300)
        run("save", str(work))
        (work / "a").write_text("hello again\n")
        os.symlink("a", work / "link")
        run("save", str(work))
        run("export", "-o", str(tmp / "one.tar"))
        run("export", "--history", "-o", str(tmp / "all.tar"))
        seed("tar_import", (tmp / "one.tar").read_bytes())
        seed("tar_import", (tmp / "all.tar").read_bytes())
        seed("store_config", (store / "config").read_bytes())
        log = (store / "log").read_bytes()
        seed("log_refs", log)
        for line in log.splitlines():
            seed("log_refs", line)
        for f in sorted((store / "refs").rglob("*")):
            if f.is_file():
                seed("log_refs", f.read_bytes())
        for f in sorted((store / "objects").rglob("*")):
            if f.is_file():
                stored = f.read_bytes()
                seed("stored_object", stored)


def main():
    if CORPUS.exists() and "--keep" not in sys.argv:
        for target in ("format_objects", "stored_object", "pack_index", "log_refs", "store_config",
                       "url_rev", "briefing_transcript", "handoff_import", "tar_import",
                       "sftp_packet", "sftp_session", "beneath_walk"):
            shutil.rmtree(CORPUS / target, ignore_errors=True)
    from_vectors()
    from_fixtures()
    sftp_packets()
    sftp_sessions()
    beneath_walks()
    from_store()
    for target in sorted(counts):
        print(f"{target}: {counts[target]} seeds")


if __name__ == "__main__":
    main()
