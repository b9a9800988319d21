#!/usr/bin/env python3
"""Render bench/sync.sh results as markdown and put them in docs/benchmarks.md.

Usage: sync_report.py RESULTS.tsv META.tsv TRACES_DIR DOCS.md|-

RESULTS lines are KEY<tab>NET<tab>LABEL<tab>TIMES (seconds, or "timeout" / "fail");
META lines are NAME<tab>VALUE; TRACES_DIR holds the stderr of runs made with
BATON_TRACE=1 BATON_TRACE_SFTP=1 (KEY.NET) and their --json reports (KEY.NET.json).

Prints the section on stdout; unless DOCS is "-", also replaces the section's heading
and everything under it, up to the next "## " heading, in DOCS (appending it if absent).
Other sections are kept as they are, so each benchmark script can own one section.
"""
import json
import os
import re
import statistics
import sys

HEADING = "## Sync (issue 3)"
DOCS_INTRO = """# Benchmarks

Each `## ` section below is written by one script and replaced wholesale when that
script is re-run: change the script, not the section. Timings are wall-clock medians.
"""
NETS = ("lo", "wan")
# Rows of the time table, in order: (key, label); the label of the results file is used
# when present.
ROWS = [
    "ssh_true", "push_init", "push_new", "git_push", "rsync", "scp", "noop",
    "clone", "git_clone", "rsync_down", "pull", "git_fetch", "push_inc", "git_push_inc",
    "clone_hist", "git_clone_hist",
]
BIG_ROWS = ["push_big", "scp_big_up", "clone_big", "scp_big_down"]
# (numerator, denominator, description) of the ratio table
RATIOS = [
    ("push_init", "git_push", "baton push (existing empty store) / git push"),
    ("push_new", "git_push", "baton push (creates the store) / git push"),
    ("push_init", "rsync", "baton push (existing empty store) / rsync -a"),
    ("push_init", "scp", "baton push (existing empty store) / scp -r"),
    ("clone", "git_clone", "baton clone / git clone --bare"),
    ("clone", "rsync_down", "baton clone / rsync -a download"),
    ("pull", "git_fetch", "baton pull of one new bundle / git fetch"),
    ("push_inc", "git_push_inc", "baton push of one new bundle / git push of the same change"),
    ("clone_hist", "git_clone_hist", "baton clone of a history of 40 pushes / git clone --bare"),
]
# "At most a few round trips" for the no-op push: at most this many batches of requests
# (transport calls in the BATON_TRACE=1 output) once connected. Each batch costs one or
# two network round trips; the estimate from the wall time at the WAN delay is reported.
NOOP_MAX_BATCHES = 3
THROUGHPUT_GOAL = 0.8
# Issue 14: a pull of one new bundle at the WAN delay, as a fraction of `git fetch`.
PULL_GOAL = 0.8
# Issue 14: a push of one new bundle at the WAN delay, as a fraction of `git push`.
PUSH_INC_GOAL = 0.8
# Issue 14: the transfer rates at the WAN delay, at least this fraction of `ssh host cat`'s.
RATE_GOAL = 1.0
# The transfer-rate pairs at the WAN delay: (with 64 MiB, with nothing, label).
RATE_PAIRS = [
    ("push_mid", "push_tiny", "upload: baton push"),
    ("cat_mid", "cat_none", "upload: ssh host 'cat > FILE'"),
    ("clone_mid", "clone_tiny", "download: baton clone"),
    ("catdown_mid", "catdown_none", "download: ssh host 'cat FILE'"),
]
TRACE_LINE = re.compile(r"^trace:\s+([\d.]+) ms\s+([\d.]+) ms\s+(?:\d+ rt\s+)?(.*)$")
CONNECTED = re.compile(r"^trace: connected in ([\d.]+) ms(?:, cipher (\S+))?")
ROUND_TRIPS = re.compile(r"^trace summary: round trips: (\d+)")
SFTP = re.compile(r"^sftp: (send|recv) (\d+) bytes, type (\d+)")


def numbers(times):
    return [t for t in times if isinstance(t, float)]


def median(results, key, net):
    entry = results.get((key, net))
    if not entry:
        return None
    ok = numbers(entry[1])
    return statistics.median(ok) if ok and len(ok) == len(entry[1]) else None


def cell(results, key, net, meta):
    """'median (min–max)' or what went wrong."""
    entry = results.get((key, net))
    if not entry:
        return "–"
    times = entry[1]
    ok = numbers(times)
    if len(ok) != len(times):
        bad = [t for t in times if not isinstance(t, float)]
        if "timeout" in bad:
            return f"> {float(meta['scp_timeout']):g} (timeout)"
        return f"failed ({len(bad)} of {len(times)} runs)"
    med = statistics.median(ok)
    runs = f" ({min(ok):.2f}–{max(ok):.2f})" if len(ok) > 1 else " (1 run)"
    return f"{med:.2f}{runs}"


def transfer_rates(results, meta):
    """MB/s of each transfer of data set (c) at the WAN delay (RATE_PAIRS), over the time
    it took beyond the same command with (almost) nothing to move: {key: rate}."""
    if not meta.get("mid_bytes"):
        return {}
    rates = {}
    for full, empty, _ in RATE_PAIRS:
        a, b = median(results, full, "wan"), median(results, empty, "wan")
        if a is not None and b is not None and a > b:
            rates[full] = int(meta["mid_bytes"]) / 1e6 / (a - b)
    return rates


def parse_trace(path):
    """Summary of one traced run: connect time, transport calls, SFTP packets."""
    out = {"connect_ms": None, "calls": [], "send": 0, "recv": 0, "send_bytes": 0, "recv_bytes": 0,
           "round_trips": None, "cipher": None}
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = CONNECTED.match(line)
            if m:
                out["connect_ms"] = float(m.group(1))
                out["cipher"] = m.group(2)
                continue
            m = ROUND_TRIPS.match(line)
            if m:
                out["round_trips"] = int(m.group(1))
                continue
            m = TRACE_LINE.match(line)
            if m:
                out["calls"].append((float(m.group(1)), float(m.group(2)), m.group(3)))
                continue
            m = SFTP.match(line)
            if m and out["connect_ms"] is not None:  # packets after the SFTP handshake
                out[m.group(1)] += 1
                out[m.group(1) + "_bytes"] += int(m.group(2))
    out["after_connect_ms"] = out["calls"][-1][0] if out["calls"] else 0.0
    return out


def push_report(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc.get("report", doc.get("data", {}).get("report", {}))


def short(what, width=90):
    return what if len(what) <= width else what[: width - 1] + "…"


def trace_block(title, tr):
    lines = [f"{title}: connected in {tr['connect_ms']:.0f} ms, then (ms since connected, ms in the call, call):", "", "```"]
    for at, took, what in tr["calls"]:
        lines.append(f"{at:9.1f} {took:8.1f}  {short(what)}")
    if tr.get("round_trips") is not None:
        lines.append(f"# {tr['round_trips']} round trips after connect (cipher {tr.get('cipher') or '?'})")
    lines += [
        f"# {len(tr['calls'])} transport calls; SFTP after the handshake: {tr['send']} packets "
        f"({tr['send_bytes']} bytes) sent, {tr['recv']} ({tr['recv_bytes']} bytes) received",
        "```",
    ]
    return lines


def render(results, meta, traces):
    rtt = 2 * float(meta["delay_ms"])
    wan = f"{rtt:g} ms RTT"
    small_mb = int(meta["small_bytes"]) / 1e6
    big_mib = int(meta["big_bytes"]) / (1 << 20)
    save = json.loads(meta["save_json"]) if meta.get("save_json") else {}
    bundle = save.get("bundle") or save.get("id") or save.get("data", {}).get("bundle")
    caveats = []
    lines = [
        HEADING,
        "",
        f"Measured {meta['date']} with `bash bench/sync.sh`.",
        "",
        f"- Machine: {meta['nproc']} CPUs ({meta['cpu']}), {meta['mem']} RAM, "
        f"Linux {meta['kernel']}, {meta['fs']} file system; client and server are the same machine.",
        f"- Load: `{meta['uptime_start']}` at the start, `{meta['uptime_end']}` at the end; "
        f"load average {meta['load_before_lo']} → {meta['load_after_lo']} during the loopback runs, "
        f"{meta['load_before_wan']} → {meta['load_after_wan']} during the {wan} runs.",
        f"- Versions: {meta['baton']}; {meta['openssh']} (client and sshd); {meta['git']}; {meta['rsync']}.",
        "- Server: a private `sshd` on 127.0.0.1 (ed25519 host and user keys, `internal-sftp`), "
        "logged into as the same user. *loopback* connects to it directly; "
        f"*{wan}* goes through `bench/delayproxy.py`, which delays every chunk by "
        f"{float(meta['delay_ms']):g} ms each way.",
        f"- Data sets (`bench/gen_sync.py`, seed {meta['seed']}, random bytes, incompressible): "
        f"(a) {meta['small_files']} files of 12 KiB in {meta['small_dirs']} directories, "
        f"{small_mb:.1f} MB{f', baton bundle `{bundle}`' if bundle else ''}; "
        f"(b) one file of {big_mib:g} MiB; "
        "(h) a history: data set (a), then 39 changes of one file each, pushed one by one "
        "(untimed; the baton remote holds 40 packs, one per push, the git remote 40 pushes)"
        + (
            f"; (c) one file of {int(meta['mid_bytes']) / (1 << 20):g} MiB, sent and fetched at the "
            f"{wan} delay only."
            if meta.get("mid_bytes")
            else "."
        ),
        f"- Method: {meta['runs']} rounds, each running every operation once in the order of the "
        "table (so that load from other work spreads over all of them alike); median (min–max) "
        "wall time of the whole command, SSH connection included; every run goes into a fresh, empty destination; data "
        "in the page cache; `sync` before each run (untimed). baton pushes a bundle already saved "
        "in a local store (`baton save`, untimed), git pushes a repository with one commit of "
        "the same files. The existing empty store is made with `baton --store PATH init` on the "
        "server side"
        + (
            ""
            if meta.get("init_push", "ok") == "ok"
            else " plus `mkdir refs/current` (a push into a plain `baton init` store fails, "
            "see the caveats)"
        )
        + ". `git clone --bare` and `baton clone` both leave a repository/store and "
        "check nothing out. The no-op push re-pushes what is already there.",
        "",
        f"| Operation (data set a: {meta['small_files']} files, {small_mb:.1f} MB) | loopback (s) | {wan} (s) |",
        "|---|--:|--:|",
    ]
    for key in ROWS:
        label = next((results[(key, n)][0] for n in NETS if (key, n) in results), key)
        label = label.replace("HOST", "host").replace("|", "\\|")
        lines.append(f"| {label} | {cell(results, key, 'lo', meta)} | {cell(results, key, 'wan', meta)} |")
    lines += [
        "",
        f"| Transfer (data set b: {big_mib:g} MiB, loopback) | seconds | MiB/s |",
        "|---|--:|--:|",
    ]
    rate = {}
    for key in BIG_ROWS:
        if (key, "lo") not in results:
            continue
        med = median(results, key, "lo")
        rate[key] = big_mib / med if med else None
        label = results[(key, "lo")][0].replace("|", "\\|")
        lines.append(
            f"| {label} | {cell(results, key, 'lo', meta)} | "
            f"{'–' if rate[key] is None else f'{rate[key]:.0f}'} |"
        )

    rates = transfer_rates(results, meta)
    if rates:
        mid_mib = int(meta["mid_bytes"]) / (1 << 20)
        lines += [
            "",
            f"| Transfer at {wan} (data set c: {mid_mib:g} MiB) | with the file (s) | with nothing to move (s) | MB/s of the difference |",
            "|---|--:|--:|--:|",
        ]
        for full, empty, label in RATE_PAIRS:
            if full in rates:
                lines.append(
                    f"| {label} | {cell(results, full, 'wan', meta)} | {cell(results, empty, 'wan', meta)} | "
                    f"{rates[full]:.1f} |"
                )

    lines += ["", f"| Ratio (time / time; below 1 = baton faster) | loopback | {wan} |", "|---|--:|--:|"]
    for num, den, what in RATIOS:
        vals = []
        for net in NETS:
            a, b = median(results, num, net), median(results, den, net)
            if a is not None and b is not None:
                vals.append(f"{a / b:.2f}")
            elif a is not None and den == "scp" and (den, net) in results:
                vals.append(f"< {a / float(meta['scp_timeout']):.3f} (scp timed out)")
            else:
                vals.append("–")
        lines.append(f"| {what} | {vals[0]} | {vals[1]} |")

    # Goals of the issue.
    lines += ["", "| Goal (issue 3) | Measured | Result |", "|---|---|---|"]
    for num in ("push_init", "push_new"):
        a, b = median(results, num, "wan"), median(results, "git_push", "wan")
        what = "existing empty store" if num == "push_init" else "push creates the store"
        if a is None or b is None:
            lines.append(f"| 1,000-file push at {wan} no slower than `git push` ({what}) | no figure | MISS |")
            continue
        amin, bmin = min(results[(num, "wan")][1]), min(results[("git_push", "wan")][1])
        verdict = "PASS" if a <= b else "MISS"
        # The fastest runs are the least disturbed by other work; say so when they disagree.
        if (a <= b) != (amin <= bmin):
            verdict += f" (medians); {'PASS' if amin <= bmin else 'MISS'} on the fastest runs"
        lines.append(
            f"| 1,000-file push at {wan} no slower than `git push` ({what}) | "
            f"median {a:.2f} s vs {b:.2f} s (ratio {a / b:.2f}); fastest runs {amin:.2f} s vs "
            f"{bmin:.2f} s (ratio {amin / bmin:.2f}) | {verdict} |"
        )
    for net in NETS:
        tr = traces.get(("noop", net))
        rep = traces.get(("noop_json", net), {})
        where = "loopback" if net == "lo" else wan
        if not tr or not rep:
            lines.append(f"| No-op push ({where}): no object bytes, at most a few round trips | no trace | MISS |")
            continue
        no_bytes = rep.get("bytes_sent", -1) == 0 and rep.get("objects_sent", -1) == 0
        calls = [c for c in tr["calls"] if "not waited for" not in c[2]]
        measured = (
            f"up_to_date={str(rep.get('up_to_date')).lower()}, {rep.get('objects_sent')} objects / "
            f"{rep.get('bytes_sent')} pack bytes; {len(calls)} transport calls, "
            f"{tr['send']} SFTP requests ({tr['send_bytes']} B out, {tr['recv_bytes']} B in) after connecting"
        )
        if net == "wan":
            trips = tr["after_connect_ms"] / rtt
            measured += (
                f"; {tr['after_connect_ms']:.0f} ms after connecting, i.e. about {trips:.0f} network "
                "round trips"
            )
        ok = no_bytes and len(calls) <= NOOP_MAX_BATCHES
        goal = f"≤ {NOOP_MAX_BATCHES} batches of requests once connected"
        lines.append(
            f"| No-op push ({where}): no object bytes, {goal} | {measured} | {'PASS' if ok else 'MISS'} |"
        )
    for num, den, what in (
        ("push_big", "scp_big_up", f"{big_mib:g} MiB push ≥ {THROUGHPUT_GOAL:g} × scp upload speed (loopback)"),
        ("clone_big", "scp_big_down", f"{big_mib:g} MiB clone ≥ {THROUGHPUT_GOAL:g} × scp download speed (loopback; same bar, not in the issue)"),
    ):
        a, b = rate.get(num), rate.get(den)
        if a is None or b is None:
            lines.append(f"| {what} | no figure | MISS |")
            continue
        verdict = "PASS" if a >= THROUGHPUT_GOAL * b else "MISS"
        lines.append(f"| {what} | {a:.0f} vs {b:.0f} MiB/s (ratio {a / b:.2f}) | {verdict} |")

    for num, den, goal, what in (
        ("pull", "git_fetch", PULL_GOAL, "Pull of one new bundle at {wan} ≤ {goal:g} × `git fetch` (issue 14)"),
        ("push_inc", "git_push_inc", PUSH_INC_GOAL,
         "Push of one new bundle at {wan} ≤ {goal:g} × `git push` of the same change (issue 14)"),
    ):
        what = what.format(wan=wan, goal=goal)
        a, b = median(results, num, "wan"), median(results, den, "wan")
        if a is not None and b is not None:
            lines.append(
                f"| {what} | median {a:.2f} s vs {b:.2f} s (ratio {a / b:.2f}) | "
                f"{'PASS' if a <= goal * b else 'MISS'} |"
            )
        elif (num, "wan") in results or (den, "wan") in results:
            lines.append(f"| {what} | no figure | MISS |")
    for num, den, what in (
        ("push_mid", "cat_mid", "Upload rate at {wan} ≥ {goal:g} × `ssh host 'cat > FILE'` (issue 14)"),
        ("clone_mid", "catdown_mid",
         "Download rate at {wan} ≥ {goal:g} × `ssh host 'cat FILE'` (the same bar; not in the issue)"),
    ):
        if num in rates and den in rates:
            a, b = rates[num], rates[den]
            lines.append(
                f"| {what.format(wan=wan, goal=RATE_GOAL)} | {a:.1f} vs {b:.1f} MB/s (ratio {a / b:.2f}) | "
                f"{'PASS' if a >= RATE_GOAL * b else 'MISS'} |"
            )

    # Round trips after connect, as BATON_TRACE counts them.
    lines += ["", "### Round trips after connect (`BATON_TRACE=1`, one extra run each)", "",
              "| sync | loopback | " + wan + " |", "| --- | --- | --- |"]
    for key, title in (
        ("push_init", "push of data set (a) into an existing empty store"),
        ("push_new", "push of data set (a) creating the store"),
        ("noop", "no-op push"),
        ("clone", "clone of data set (a)"),
        ("pull", "pull of one new bundle (5 files of data set (a) changed)"),
        ("push_inc", "push of one new bundle (5 files changed), after a push of data set (a)"),
        ("clone_hist", "clone of a history of 40 pushes (40 packs)"),
        ("push_big", "push of data set (b)"),
        ("clone_big", "clone of data set (b)"),
    ):
        row = []
        for net in NETS:
            tr = traces.get((key, net))
            row.append(str(tr["round_trips"]) if tr and tr.get("round_trips") is not None else "–")
        lines.append(f"| {title} | " + " | ".join(row) + " |")

    # Where baton's time goes.
    lines += ["", "### Where baton's time goes (`BATON_TRACE=1`, one extra run each)", ""]
    for key, net, title in (
        ("push_init", "wan", f"Push of data set (a) into an existing empty store, {wan}"),
        ("push_new", "wan", f"Push of data set (a) creating the store, {wan}"),
        ("noop", "wan", f"No-op push, {wan}"),
        ("clone", "wan", f"Clone of data set (a), {wan}"),
        ("pull", "wan", f"Pull of one new bundle, {wan}"),
        ("push_inc", "wan", f"Push of one new bundle, {wan}"),
        ("push_big", "lo", "Push of data set (b), loopback"),
        ("clone_big", "lo", "Clone of data set (b), loopback"),
    ):
        tr = traces.get((key, net))
        if tr and tr["connect_ms"] is not None:
            lines += trace_block(title, tr) + [""]
    ssh_lo, ssh_wan = median(results, "ssh_true", "lo"), median(results, "ssh_true", "wan")
    if ssh_wan:
        lines.append(
            f"For scale: `ssh host true` takes {ssh_lo:.2f} s on loopback and {ssh_wan:.2f} s at "
            f"{wan} (the difference is about {(ssh_wan - ssh_lo) / (rtt / 1000):.0f} round trips of the proxy); "
            "baton's own connection (SSH and SFTP handshakes) is the `connected in` figure above."
        )
        lines.append("")

    # Caveats.
    nproc = int(meta["nproc"])
    loads = [float(meta[k].split()[0]) for k in meta if k.startswith("load_")]
    if loads and max(loads) > nproc / 2:
        caveats.append(
            f"the 1-minute load average reached {max(loads):.2f} on {nproc} CPUs: other work shared "
            "the machine, and client, server and proxy compete for the same cores"
        )
    noisy = sorted(
        {
            f"`{label} ({'loopback' if net == 'lo' else wan})`"
            for (key, net), (label, times) in results.items()
            if len(numbers(times)) > 1 and max(numbers(times)) > 1.25 * min(numbers(times))
        }
    )
    if len(noisy) > 4:
        caveats.append(
            f"max/min spread above 25% for {len(noisy)} of {len(results)} rows: the medians are "
            "the figures to trust, and ratios between tools interleaved in the same rounds"
        )
    elif noisy:
        caveats.append("max/min spread above 25% for " + "; ".join(noisy))
    git_lo, baton_lo = median(results, "git_push", "lo"), median(results, "push_init", "lo")
    if git_lo and baton_lo:
        caveats.append(
            f"`git push` needs {git_lo:.2f} s even on loopback (baton: {baton_lo:.2f} s): its time "
            "is mostly CPU (deflating the pack, then `index-pack` on the server), so load from "
            "other work inflates it more than baton's push, which waits on round trips; on a "
            "busy machine the fastest runs are the fairer comparison"
        )
    if int(meta["scp_wan_runs"]) < int(meta["runs"]):
        caveats.append(
            f"`scp -r` at {wan} ran {meta['scp_wan_runs']} time(s) only, capped at "
            f"{float(meta['scp_timeout']):g} s (one SFTP request cycle per file)"
        )
    if meta.get("init_push", "ok") != "ok":
        caveats.append(
            "**bug**: `baton push` into a store made by `baton init` (and never saved into) "
            f"fails: `{meta['init_push'].strip()}`. `baton init` creates no `refs/current` "
            "directory and the push, finding a `config`, assumes the layout is complete and "
            "publishes its ref into the missing directory; the benchmark pre-creates it"
        )
    if "src modified" in meta["baton"]:
        caveats.append("baton was built from a working tree with uncommitted changes under src/")
    caveats.append(
        "baton fsyncs the pack and ref it publishes and reads back what it staged; scp and "
        "rsync never fsync, so on a slow disk baton pays for durability that they skip"
    )
    lines += ["Caveats:", ""] + [f"- {c}." for c in caveats]
    lines += [
        "",
        "Reproduce: `bash bench/sync.sh` (also `BENCH_RUNS`, `BENCH_DELAY_MS`, `BENCH_SCP_TIMEOUT`, "
        "`BENCH_SCP_WAN_RUNS`, `BENCH_DIR`, `BENCH_KEEP=1`; fewer than 3 rounds or another delay "
        "only print the section unless `BENCH_DOCS=1`).",
        "",
    ]
    return "\n".join(lines)


def replace_section(text, section):
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip() == HEADING), None)
    if start is None:
        return text.rstrip("\n") + "\n\n" + section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[:start]) + section + ("\n" if end < len(lines) else "") + "".join(lines[end:])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    results_path, meta_path, traces_dir, docs = sys.argv[1:]
    results = {}
    with open(results_path) as f:
        for line in f:
            key, net, label, times = line.rstrip("\n").split("\t")
            parsed = []
            for t in times.split():
                try:
                    parsed.append(float(t))
                except ValueError:
                    parsed.append(t)
            results[(key, net)] = (label, parsed)
    with open(meta_path) as f:
        meta = dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
    traces = {}
    for key in ("push_init", "push_new", "noop", "clone", "pull", "push_inc", "clone_hist", "push_big", "clone_big"):
        for net in NETS:
            tr = parse_trace(os.path.join(traces_dir, f"{key}.{net}"))
            if tr:
                traces[(key, net)] = tr
            rep = push_report(os.path.join(traces_dir, f"{key}.{net}.json"))
            if rep:
                traces[(key + "_json", net)] = rep
    section = render(results, meta, traces)
    print(section)
    if docs != "-":
        text = open(docs).read() if os.path.exists(docs) else DOCS_INTRO
        with open(docs + ".tmp", "w") as f:
            f.write(replace_section(text, section))
        os.replace(docs + ".tmp", docs)


if __name__ == "__main__":
    main()
