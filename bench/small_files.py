"""Writes N small text files (one to four 75-byte lines each) into 500 directories under
ROOT, the same bytes for the same N: the many-small-files tree of bench/clone_loose.sh and
bench/resave.sh.

Usage: python3 bench/small_files.py ROOT N
"""
import os
import random
import sys

root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(32)
for i in range(n):
    d = os.path.join(root, f"d{i % 500}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.txt"), "w") as f:
        f.write(f"file {i}: {rng.getrandbits(256):064x}\n" * (1 + i % 4))
