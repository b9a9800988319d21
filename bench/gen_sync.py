#!/usr/bin/env python3
"""Generate the sync benchmark data sets deterministically (same seed, same bytes).

Usage: gen_sync.py small OUT_DIR [SEED]   1,000 files of 12 KiB in 20 directories (12 MB)
       gen_sync.py big OUT_FILE [SEED]    one 256 MiB file
       gen_sync.py mid OUT_FILE [SEED]    one 64 MiB file (the transfer rates at the WAN delay)

Both are random bytes (incompressible), so no tool gains from compressing on the wire.
"""
import os
import random
import sys

SMALL_FILES = 1000
SMALL_SIZE = 12 * 1024
SMALL_DIRS = 20
BIG_SIZE = 256 << 20
MID_SIZE = 64 << 20
CHUNK = 1 << 20


def small(out, rng):
    for d in range(SMALL_DIRS):
        os.makedirs(os.path.join(out, f"d{d:02d}"), exist_ok=True)
    for i in range(SMALL_FILES):
        with open(os.path.join(out, f"d{i % SMALL_DIRS:02d}", f"f{i:04d}.bin"), "wb") as f:
            f.write(rng.randbytes(SMALL_SIZE))


def one_file(out, rng, size):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(rng.randbytes(CHUNK))


def main():
    sizes = {"big": BIG_SIZE, "mid": MID_SIZE}
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("small", *sizes):
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) == 4 else 42
    rng = random.Random(f"{kind}-{seed}")
    if kind == "small":
        small(out, rng)
    else:
        one_file(out, rng, sizes[kind])


if __name__ == "__main__":
    main()
