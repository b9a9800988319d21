#!/usr/bin/env python3
"""Generate the benchmark tree deterministically: the same seed and size give the same bytes.

Usage: gen_tree.py OUT_DIR MIB [SEED]

MIB MiB as files of 256 KiB (4 per MiB) spread round-robin over 40 directories.
Even-numbered files are random bytes (incompressible), odd-numbered files are text
(lines of words and numbers, compressible about 3x by zstd -3).
"""
import os
import random
import sys

FILE_SIZE = 256 * 1024
DIRS = 40

# A fixed vocabulary, itself generated from the seed so nothing depends on locale or files.
def vocabulary(rng, n=2000):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(n)]


def text_file(rng, vocab):
    out = []
    size = 0
    while size < FILE_SIZE:
        words = rng.choices(vocab, k=64)
        nums = [rng.randrange(100000) for _ in range(8)]
        for i in range(8):
            line = f"{' '.join(words[i * 8:(i + 1) * 8])} {nums[i]}\n"
            out.append(line)
            size += len(line)
    return "".join(out).encode()[:FILE_SIZE]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    out, mib = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) == 4 else 42
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    files = mib * 4
    for d in range(min(DIRS, files)):
        os.makedirs(os.path.join(out, f"d{d:02d}"), exist_ok=True)
    for i in range(files):
        if i % 2 == 0:
            name, data = f"f{i:05d}.bin", rng.randbytes(FILE_SIZE)
        else:
            name, data = f"f{i:05d}.txt", text_file(rng, vocab)
        with open(os.path.join(out, f"d{i % DIRS:02d}", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
