#!/usr/bin/env python3
"""Tests of pack.py (python3 -m unittest discover -s scripts/gpu -p '*_test.py'; scripts/test.sh
runs them where python3 is): what goes into the archive, its parts, and the restore."""
import io
import os
import tarfile
import tempfile
import unittest
from contextlib import redirect_stdout

import pack


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def names_in(archive):
    with tarfile.open(archive, "r:xz") as t:
        return sorted(m.name for m in t.getmembers() if m.isfile())


def run_pack(*args):
    out = io.StringIO()
    with redirect_stdout(out):
        pack.pack(*args)
    return out.getvalue()


class PackTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "results")
        self.out = os.path.join(self.tmp.name, "out", "r.tar.xz")
        os.makedirs(os.path.dirname(self.out))

    def tearDown(self):
        self.tmp.cleanup()

    def test_newest_checkpoint_of_an_unfinished_run_and_none_of_a_finished_one(self):
        write(f"{self.root}/run.log", b"log\n")
        for step in ("000000100", "000000200", "000000300"):
            write(f"{self.root}/cut/checkpoints/ckpt-{step}.npz", step.encode())
            write(f"{self.root}/done/checkpoints/ckpt-{step}.npz", step.encode())
        write(f"{self.root}/done/report.json", b"{}")
        write(f"{self.root}/done/distilled.npz", b"labels")
        write(f"{self.root}/cut/.ldtorch.lock", b"pid")
        said = run_pack(self.root, self.out, 15, 3)
        self.assertEqual(names_in(self.out), [
            "cut/checkpoints/ckpt-000000300.npz", "done/distilled.npz", "done/report.json", "run.log"])
        self.assertIn("2 older checkpoints", said)
        self.assertIn("3 checkpoints of finished runs", said)

    def test_parts_restore_to_the_same_files(self):
        big = os.urandom(3 * 1024 * 1024)  # random bytes: xz cannot shrink them below 1 MiB
        write(f"{self.root}/cut/checkpoints/ckpt-000000010.npz", big)
        write(f"{self.root}/cut/history.jsonl", b"{}\n")
        said = run_pack(self.root, self.out, 1, 5)
        self.assertFalse(os.path.exists(self.out))
        self.assertTrue(os.path.exists(self.out + ".03"))
        self.assertFalse(os.path.exists(self.out + ".04"))
        self.assertIn("4 parts of at most 1 MiB", said)
        back = os.path.join(self.tmp.name, "back")
        with redirect_stdout(io.StringIO()):
            pack.restore(self.out, back)
        with open(f"{back}/cut/checkpoints/ckpt-000000010.npz", "rb") as f:
            self.assertEqual(f.read(), big)

    def test_too_large_leaves_out_checkpoints_first_and_names_them(self):
        write(f"{self.root}/cut/checkpoints/ckpt-000000010.npz", os.urandom(2 * 1024 * 1024))
        write(f"{self.root}/cut/report.log", b"small")
        said = run_pack(self.root, self.out, 1, 1)
        self.assertEqual(names_in(self.out), ["cut/report.log"])
        self.assertIn("left out of the pack (over 1 × 1 MiB): cut/checkpoints/ckpt-000000010.npz", said)

    def test_restore_refuses_a_member_outside_the_folder(self):
        evil = os.path.join(self.tmp.name, "evil.tar.xz")
        with tarfile.open(evil, "w:xz") as t:
            info = tarfile.TarInfo("../outside.txt")
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
        with self.assertRaises(SystemExit), redirect_stdout(io.StringIO()):
            pack.restore(evil, os.path.join(self.tmp.name, "back"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "outside.txt")))


if __name__ == "__main__":
    unittest.main()
