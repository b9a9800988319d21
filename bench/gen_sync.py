#!/usr/bin/env python3
"""Generate the sync benchmark data sets deterministically (same seed, same bytes).

Usage: gen_sync.py small OUT_DIR [SEED]   1,000 files of 12 KiB in 20 directories (12 MB)
       gen_sync.py big OUT_FILE [SEED]    one 256 MiB file

Both are random bytes (incompressible), so no tool gains from compressing on the wire.
"""
import os
import random
import sys

SMALL_FILES = 1000
SMALL_SIZE = 12 * 1024
SMALL_DIRS = 20
BIG_SIZE = 256 << 20
CHUNK = 1 << 20


def small(out, rng):
    for d in range(SMALL_DIRS):
        os.makedirs(os.path.join(out, f"d{d:02d}"), exist_ok=True)
    for i in range(SMALL_FILES):
        with open(os.path.join(out, f"d{i % SMALL_DIRS:02d}", f"f{i:04d}.bin"), "wb") as f:
            f.write(rng.randbytes(SMALL_SIZE))


def big(out, rng):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        for _ in range(BIG_SIZE // CHUNK):
            f.write(rng.randbytes(CHUNK))


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("small", "big"):
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) == 4 else 42
    rng = random.Random(f"{kind}-{seed}")
    (small if kind == "small" else big)(out, rng)


if __name__ == "__main__":
    main()
