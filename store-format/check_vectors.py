#!/usr/bin/env python3
"""Check store-format/vectors/ against a second, independent implementation of SPEC.md.

Nothing here uses baton's code: encodings are rebuilt with Python's json module, ids with
the `blake3` package from PyPI (pip install blake3), loose objects are split into zstd
frames by hand and decompressed with the `zstd` command-line tool (skipped if missing).
The Rust test tests/cli/format_vectors.rs checks the same files against baton itself, so
the two implementations agree with each other through the vectors.

Usage: python3 store-format/check_vectors.py    (exit status 0 when every check passes)
"""

import datetime
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import blake3
except ImportError:
    sys.exit("check_vectors.py needs the blake3 package: pip install blake3")

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "vectors")
HEX64 = re.compile(r"[0-9a-f]{64}")
TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z")
TARGET = re.compile(r"[A-Za-z0-9._-]{1,64}")
KINDS = ("file", "exec", "symlink", "dir")
checks = 0


class Reject(Exception):
    pass


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        raise AssertionError(what)


def load(name):
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        return json.load(f)


def b3(data):
    return blake3.blake3(data).hexdigest()


def pattern(n):
    return bytes(i % 251 for i in range(n))


def field_bytes(case, prefix):
    if prefix in case:
        return case[prefix].encode("utf-8")
    if prefix + "_hex" in case:
        return bytes.fromhex(case[prefix + "_hex"])
    return pattern(case[prefix + "_pattern_len"])


# ---------------------------------------------------------------- encoding (SPEC 3)


def canonical(value):
    """Compact JSON exactly as SPEC.md section 3 describes (Python's escaping agrees)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )


def name_key(name):
    return name.encode("utf-8")


def encode_tree(entries):
    entries = sorted(entries, key=lambda e: name_key(e["name"]))
    body = [{"name": e["name"], "kind": e["kind"], "size": e["size"], "id": e["id"]} for e in entries]
    return canonical({"type": "tree", "version": 1, "entries": body})


def encode_bundle(f):
    meta = {k: f["metadata"][k] for k in sorted(f["metadata"], key=name_key)}
    keys = ["type", "version", "tree", "parents", "created", "from", "to", "summary", "note"]
    value = {k: f[k] for k in keys}
    value["metadata"] = meta
    return canonical(value)


LOG_KEYS = ["time", "ref", "old", "new", "action", "from", "to", "host", "user"]


def encode_log_line(e):
    return canonical({k: e[k] for k in LOG_KEYS}) + b"\n"


# ---------------------------------------------------------------- decoding (SPEC 3.2, 4, 9, 10)


def parse_json(data):
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise Reject("duplicate member")
        return dict(pairs)

    try:
        text = data.decode("utf-8")
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise Reject(str(e))


def _no_constant(name):
    raise Reject("not JSON: " + name)


def want(cond, why):
    if not cond:
        raise Reject(why)


def is_uint(v, bits):
    return type(v) is int and 0 <= v < (1 << bits)  # bool is an int in Python: excluded


def is_str(v):
    return type(v) is str


def check_id(v):
    want(is_str(v) and HEX64.fullmatch(v), "bad id")


def check_time(v):
    want(is_str(v), "time not a string")
    m = TIME.fullmatch(v)
    want(m, "time not YYYY-MM-DDTHH:MM:SSZ")
    y, mo, d, h, mi, s = map(int, m.groups())
    want(1970 <= y <= 9999, "year out of range")
    try:
        datetime.datetime(y, mo, d, h, mi, s)  # rejects Feb 30, hour 24, second 60
    except ValueError as e:
        raise Reject(str(e))


def check_entry_name(n):
    want(is_str(n) and n not in ("", ".", "..") and "/" not in n and "\0" not in n, "bad name")


def check_ref_name(r):
    want(is_str(r), "ref not a string")
    if r == "current":
        return
    want(r.startswith("targets/"), "not a ref name")
    t = r[len("targets/"):]
    want(TARGET.fullmatch(t) and t[0] not in ".-", "bad target name")


def exact_keys(obj, keys):
    want(type(obj) is dict and list(obj) == keys, "members missing, unknown or out of order")


def roundtrip(data, value):
    try:
        again = canonical(value)
    except (UnicodeEncodeError, ValueError):
        raise Reject("does not re-encode")
    want(again == data, "not canonical")


def decode_tree(data):
    v = parse_json(data)
    exact_keys(v, ["type", "version", "entries"])
    want(v["type"] == "tree" and is_uint(v["version"], 32) and v["version"] == 1, "not a v1 tree")
    want(type(v["entries"]) is list, "entries not a list")
    for e in v["entries"]:
        exact_keys(e, ["name", "kind", "size", "id"])
        check_entry_name(e["name"])
        want(e["kind"] in KINDS, "bad kind")
        want(is_uint(e["size"], 64), "bad size")
        check_id(e["id"])
    names = [name_key(e["name"]) for e in v["entries"]]
    want(all(a < b for a, b in zip(names, names[1:])), "entries not strictly sorted")
    roundtrip(data, v)
    return v["entries"]


BUNDLE_KEYS = ["type", "version", "tree", "parents", "created", "from", "to", "summary", "note", "metadata"]


def decode_bundle(data):
    v = parse_json(data)
    exact_keys(v, BUNDLE_KEYS)
    want(v["type"] == "bundle" and is_uint(v["version"], 32) and v["version"] == 1, "not a v1 bundle")
    check_id(v["tree"])
    want(type(v["parents"]) is list, "parents not a list")
    for p in v["parents"]:
        check_id(p)
    want(len(set(v["parents"])) == len(v["parents"]), "parent twice")
    check_time(v["created"])
    for k in ("from", "to", "summary", "note"):
        want(is_str(v[k]), k + " not a string")
    want(type(v["metadata"]) is dict, "metadata not an object")
    for k, x in v["metadata"].items():
        want(is_str(x), "metadata value not a string")
    keys = [name_key(k) for k in v["metadata"]]
    want(keys == sorted(keys), "metadata keys not sorted")
    roundtrip(data, v)
    return v


def decode_log_line(data):
    v = parse_json(data)
    exact_keys(v, LOG_KEYS)
    check_time(v["time"])
    check_ref_name(v["ref"])
    for k in ("old", "new"):
        if v[k] is not None:
            check_id(v[k])
    for k in ("action", "from", "to", "host", "user"):
        want(is_str(v[k]), k + " not a string")
    roundtrip(data, v)
    return v


def decode_config(data):
    v = parse_json(data)
    want(type(v) is dict, "config not an object")
    want(v.get("format") == "baton-store", "not a baton store")
    want(is_uint(v.get("version"), 32) and v["version"] == 1, "unsupported version")
    features = v.get("features", [])
    want(type(features) is list and all(is_str(f) for f in features), "bad features")
    want(not features, "unknown feature")  # version 1 defines no features
    return v


def parse_generation(name):
    if len(name) != 20 or not name.isascii() or not name.isdigit():
        return None
    g = int(name)
    return g if 0 < g < (1 << 64) else None


def resolve_ref_dir(ref, files):
    """The value of a ref given the files of its directory (SPEC 8.3), or Reject."""
    gens = {}
    for f in files:
        if f["file"].startswith(".tmp-"):
            continue
        g = parse_generation(f["file"])
        want(g is not None, "stray file in ref directory")
        gens[g] = f["content"].encode("utf-8")
    if not gens:
        return None
    content = gens[max(gens)]
    want(content.endswith(b"\n"), "generation file without newline")
    entry = decode_log_line(content[:-1])
    want(entry["ref"] == ref, "generation names another ref")
    return entry["new"]


# ---------------------------------------------------------------- zstd frames (SPEC 6)


def zstd_frame_length(data, pos=0):
    """Length of the one zstd frame (or skippable frame) starting at data[pos:]."""
    magic = int.from_bytes(data[pos:pos + 4], "little")
    want(len(data) >= pos + 4, "truncated")
    if magic & 0xFFFFFFF0 == 0x184D2A50:
        want(len(data) >= pos + 8, "truncated")
        return 8 + int.from_bytes(data[pos + 4:pos + 8], "little"), True
    want(magic == 0xFD2FB528, "not a zstd frame")
    want(len(data) > pos + 4, "truncated")
    fhd = data[pos + 4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    n = 4 + 1 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    n += (1 if single else 0, 2, 4, 8)[fcs_flag]
    while True:
        want(len(data) >= pos + n + 3, "truncated")
        header = int.from_bytes(data[pos + n:pos + n + 3], "little")
        last, btype, bsize = header & 1, (header >> 1) & 3, header >> 3
        want(btype != 3, "reserved block type")
        n += 3 + (1 if btype == 1 else bsize)
        if last:
            break
    n += 4 if checksum else 0
    want(len(data) >= pos + n, "truncated")
    return n, False


def check_loose_object(file_bytes, obj_id, size):
    """SPEC 6: exactly one zstd frame whose content hashes to the id."""
    length, skippable = zstd_frame_length(file_bytes)
    want(not skippable, "skippable frame")
    want(length == len(file_bytes), "bytes after the frame")
    if shutil.which("zstd") is None:
        return False
    run = subprocess.run(["zstd", "-d", "-q", "-c"], input=file_bytes, capture_output=True)
    want(run.returncode == 0, "zstd -d failed")
    want(size in (None, len(run.stdout)) and b3(run.stdout) == obj_id, "content does not match the id")
    return True


# ---------------------------------------------------------------- packs (SPEC 7)

PACK_MAGIC = b"baton-pack-v1\n\0\0"
FOOTER_MAGIC = b"baton-pack-end\n\0"


def read_pack_index(data):
    """The (id, offset, length) entries of a pack, or Reject (SPEC 7)."""
    want(len(data) >= 16 + 32, "too short")
    want(data[:16] == PACK_MAGIC, "bad magic")
    want(data[-16:] == FOOTER_MAGIC, "bad end marker")
    count = int.from_bytes(data[-32:-24], "big")
    index_offset = int.from_bytes(data[-24:-16], "big")
    want(index_offset >= 16 and index_offset + 48 * count + 32 == len(data), "index does not fit")
    entries = []
    for i in range(count):
        raw = data[index_offset + 48 * i:index_offset + 48 * (i + 1)]
        obj, offset, length = raw[:32].hex(), int.from_bytes(raw[32:40], "big"), int.from_bytes(raw[40:48], "big")
        want(offset >= 16 and offset + length <= index_offset, "entry outside the object area")
        want(not entries or entries[-1][0] < obj, "index not strictly sorted")
        entries.append((obj, offset, length))
    return entries


# ---------------------------------------------------------------- the checks


def expect_reject(fn, data, why):
    global checks
    checks += 1
    try:
        fn(data)
    except Reject:
        return
    raise AssertionError("accepted but must be rejected: " + why)


def check_key_wrap(v):
    """The baton-wrap stanza of encrypted stores (ENCRYPTION.md, Envelope)."""
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError:
        print("key_wrap.json skipped: pip install cryptography to check it")
        return
    import base64
    name_key = bytes.fromhex(v["name_key"])
    salt = bytes.fromhex(v["salt"])
    secret = blake3.blake3(name_key, derive_key_context="baton age-v1 2026-11 file-key wrap secret").digest()
    ok(secret.hex() == v["wrap_secret"], "key wrap secret")
    wrap_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt,
                    info=b"baton.age-v1/file-key-wrap").derive(secret)
    body = ChaCha20Poly1305(wrap_key).encrypt(b"\0" * 12, bytes.fromhex(v["file_key"]), None)
    ok(body.hex() == v["body"], "key wrap body")
    ok(base64.b64encode(salt).decode().rstrip("=") == v["arg"], "key wrap salt argument")


def main():
    for v in load("blobs.json")["vectors"]:
        if "utf8" in v:
            data = v["utf8"].encode("utf-8")
        elif "hex" in v:
            data = bytes.fromhex(v["hex"])
        else:
            data = pattern(v["pattern_len"])
        ok(len(data) == v["size"] and b3(data) == v["id"], "blob " + v["name"])

    for v in load("trees.json")["vectors"]:
        data = v["canonical"].encode("utf-8")
        ok(encode_tree(v["entries"]) == data, "tree encoding " + v["name"])
        ok(len(data) == v["size"] and b3(data) == v["id"], "tree id " + v["name"])
        ok(decode_tree(data) == sorted(v["entries"], key=lambda e: name_key(e["name"])), "tree decode")

    for v in load("bundles.json")["vectors"]:
        data = v["canonical"].encode("utf-8")
        ok(encode_bundle(v["fields"]) == data, "bundle encoding " + v["name"])
        ok(len(data) == v["size"] and b3(data) == v["id"], "bundle id " + v["name"])
        ok(decode_bundle(data) == v["fields"], "bundle decode " + v["name"])

    for v in load("log.json")["vectors"]:
        line = v["line"].encode("utf-8")
        ok(encode_log_line(v["entry"]) == line, "log line " + v["name"])
        ok(decode_log_line(line[:-1]) == v["entry"], "log decode " + v["name"])

    times = load("times.json")
    for v in times["valid"]:
        check_time(v["text"])
        t = datetime.datetime.strptime(v["text"], "%Y-%m-%dT%H:%M:%SZ")
        ok(t.replace(tzinfo=datetime.timezone.utc).timestamp() == v["unix_seconds"], v["text"])
    for v in times["invalid"]:
        expect_reject(check_time, v["text"], v["reason"])

    invalid = load("invalid.json")
    for v in invalid["trees"]:
        expect_reject(decode_tree, field_bytes(v, "bytes"), "tree: " + v["reason"])
    for v in invalid["bundles"]:
        expect_reject(decode_bundle, field_bytes(v, "bytes"), "bundle: " + v["reason"])
    for v in invalid["log_lines"]:
        expect_reject(decode_log_line, v["line"].encode("utf-8"), "log line: " + v["reason"])

    refs = load("refs.json")
    for v in refs["ref_names"]["valid"]:
        check_ref_name(v["ref"])
        ok(v["dir"] == "refs/" + v["ref"], v["ref"])
    for v in refs["ref_names"]["invalid"]:
        expect_reject(check_ref_name, v["ref"], v["reason"])
    for v in refs["generation_files"]["valid"]:
        ok(parse_generation(v["file"]) == v["generation"], v["file"])
        ok("%020d" % v["generation"] == v["file"], v["file"])
    for v in refs["generation_files"]["invalid"]:
        ok(parse_generation(v["file"]) is None, v["file"])
    for v in refs["ref_dirs"]:
        if v.get("error"):
            expect_reject(lambda files: resolve_ref_dir(v["ref"], files), v["files"], v["name"])
        else:
            ok(resolve_ref_dir(v["ref"], v["files"]) == v["value"], v["name"])

    decompressed = 0
    for v in load("objects.json")["vectors"]:
        content = field_bytes(v, "content")
        ok(len(content) == v["size"] and b3(content) == v["id"], "object content " + v["name"])
        ok(v["path"] == "objects/%s/%s" % (v["id"][:2], v["id"][2:]), "object path " + v["name"])
        data = bytes.fromhex(v["file_hex"])
        if v["valid"]:
            decompressed += check_loose_object(data, v["id"], v["size"])
            ok(True, v["name"])
        else:
            try:
                check_loose_object(data, v["id"], v["size"])
            except Reject:
                ok(True, v["name"])
            else:
                ok(shutil.which("zstd") is None, "loose object accepted: " + v["name"])

    packs = load("packs.json")
    for v in packs["valid"]:
        data = bytes.fromhex(v["pack_hex"])
        ok(b3(data) == v["id"] and v["file"] == "packs/%s.pack" % v["id"], "pack id " + v["name"])
        entries = read_pack_index(data)
        ok(len(data) - 32 - 48 * len(entries) == v["index_offset"], "index offset " + v["name"])
        want_entries = [(e["id"], e["offset"], e["length"]) for e in v["entries"]]
        ok(entries == want_entries, "pack index " + v["name"])
        for e in v["entries"]:
            stored = data[e["offset"]:e["offset"] + e["length"]]
            decompressed += check_loose_object(stored, e["id"], e["size"])
    for v in packs["invalid"]:
        expect_reject(read_pack_index, bytes.fromhex(v["pack_hex"]), "pack: " + v["reason"])
    for v in packs["corrupt_objects"]:
        data = bytes.fromhex(v["pack_hex"])
        ok(b3(data) == v["id"], "pack id " + v["name"])
        (obj, offset, length), = read_pack_index(data)
        if shutil.which("zstd"):
            expect_reject(lambda d: check_loose_object(d, obj, None), data[offset:offset + length], v["name"])

    config = load("config.json")
    decode_config(config["written"].encode("utf-8"))
    ok(config["written"] == '{\n  "format": "baton-store",\n  "version": 1,\n  "features": []\n}\n', "config")
    with_target = decode_config(config["written_with_target"].encode("utf-8"))
    pretty = json.dumps(with_target, indent=2, ensure_ascii=False) + "\n"
    ok(pretty == config["written_with_target"], "config with a target")
    check_ref_name("targets/" + with_target["default_target"])
    ok(list(with_target["targets"]) == [with_target["default_target"]], "default target")
    for v in config["accept"]:
        decode_config(v["bytes"].encode("utf-8"))
    for v in config["reject"]:
        expect_reject(decode_config, v["bytes"].encode("utf-8"), "config: " + v["name"])

    check_key_wrap(load("key_wrap.json"))

    note = "" if decompressed else " (zstd not installed: loose objects checked for framing only)"
    print("store-format vectors: %d checks passed%s" % (checks, note))


if __name__ == "__main__":
    main()
