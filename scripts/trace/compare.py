#!/usr/bin/python3
"""How far trace B of authors.py is from trace A, meta-step by meta-step (relative to A): the
first step whose target loss differs by more than 1e-4 and the largest relative difference over
the first 10, 50 and 100 meta-steps, as TestReplayAuthorsTrace prints for ldtorch against
a trace. Two runs of the authors' code (another --threads, a rounding-sized --init-noise)
measure how far their code moves from itself: the tolerance a reimplementation can meet.

    /usr/bin/python3 scripts/trace/compare.py A.npz B.npz
"""
import sys

import numpy as np


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    a, b = (np.load(p) for p in sys.argv[1:])
    la, lb = a["target_loss"], b["target_loss"]
    n = min(len(la), len(lb))
    rel = np.abs(lb[:n] - la[:n]) / np.abs(la[:n])  # relative to A, as the replay to its trace
    over = np.nonzero(rel > 1e-4)[0]
    print("%s against %s, %d meta-steps" % (sys.argv[1], sys.argv[2], n))
    print("first meta-step whose target loss differs by more than 1e-4 (relative): %s"
          % (over[0] + 1 if len(over) else "none"))
    for up_to in (10, 50, 100):
        k = int(np.argmax(rel[:up_to]))
        at = " (step %d)" % (k + 1) if rel[k] > 0 else ""
        print("largest relative target-loss difference over meta-steps 1-%d: %.2g%s" % (up_to, rel[k], at))
    for key in ("init_labels", "init_images"):
        if key in a and key in b:
            d = np.abs(b[key] - a[key]).max() / np.abs(a[key]).max()
            print("%s: largest difference %.2g (relative to the largest value)" % (key, d))


if __name__ == "__main__":
    main()
