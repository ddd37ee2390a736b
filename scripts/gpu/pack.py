#!/usr/bin/env python3
"""pack.py: scripts/gpu/run.sh's results archive, with python3 alone (a GPU machine may have
no xz tool), in parts small enough to come back from a lent machine.

  pack.py pack RESULTS FILE LIMIT_MIB PARTS
        RESULTS' files into FILE (tar.xz, names relative to RESULTS). Of each checkpoints
        folder only the newest checkpoint goes in: it alone continues the run; and none of a
        run that finished (report.json beside its checkpoints folder). An archive
        over LIMIT_MIB is cut into FILE.00, FILE.01, ... of LIMIT_MIB each (FILE itself is
        then not written), at most PARTS of them; one that needs more is packed again
        without the checkpoints, then without the largest files until it fits. Each file
        left out is named.
  pack.py restore FILE RESULTS
        FILE, or its parts FILE.00, FILE.01, ... where FILE is absent, unpacked into RESULTS
        (regular files and folders only, nothing outside RESULTS).
"""
import os
import re
import shutil
import sys
import tarfile
import tempfile


def part_name(out, i):
    return f"{out}.{i:02d}"


def existing_parts(out):
    parts = []
    while os.path.exists(part_name(out, len(parts))):
        parts.append(part_name(out, len(parts)))
    return parts


def checkpoints_left_out(root, files):
    """files without the checkpoints that nothing continues from, then those left out: of a
    run that goes on, the older checkpoints (ckpt-<meta-step>.npz, zero-padded, so that names
    sort by meta-step; the newest alone continues it); of a run that finished (report.json
    beside its checkpoints folder), the whole folder (a CIFAR checkpoint is 18 MiB packed)."""
    by_folder = {}
    for f in files:
        folder = os.path.dirname(f)
        if os.path.basename(folder) == "checkpoints":
            by_folder.setdefault(folder, []).append(f)
    older, finished = [], []
    for folder, group in by_folder.items():
        if os.path.isfile(os.path.join(root, os.path.dirname(folder), "report.json")):
            finished += group
        else:
            older += sorted(f for f in group if os.path.basename(f).startswith("ckpt-"))[:-1]
    left = set(older) | set(finished)
    return [f for f in files if f not in left], sorted(older), sorted(finished)


def pack(root, out, limit_mib, max_parts):
    limit = limit_mib * 1024 * 1024
    ours = re.compile(re.escape(os.path.abspath(out)) + r"(\.tmp|\.\d\d)?")
    files = []
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(folder, name)
            if ours.fullmatch(os.path.abspath(path)):
                continue  # the archive itself or its parts, where written inside RESULTS
            if name == ".ldtorch.lock":
                continue  # a run's lock names a process of this machine
            if os.path.isfile(path) and not os.path.islink(path):
                files.append(os.path.relpath(path, root))
    tmp = out + ".tmp"

    def write(keep):
        # preset 1: a 21 MB CIFAR-10 checkpoint (float32 arrays) packs to 17.9 MiB against
        # 17.7 at xz's default preset 6, in 0.6 of the time.
        with tarfile.open(tmp, "w:xz", preset=1) as archive:
            for name in sorted(keep):
                archive.add(os.path.join(root, name), arcname=name, recursive=False)
        return os.path.getsize(tmp)

    keep, older, finished = checkpoints_left_out(root, files)
    size = write(keep)
    left_out = []
    if size > limit * max_parts:
        # Checkpoints only serve a run continued elsewhere; the results are the rest.
        left_out = [f for f in keep if "checkpoints" in f.split(os.sep)]
        keep = [f for f in keep if f not in left_out]
        size = write(keep)
        by_size = sorted(keep, key=lambda f: os.path.getsize(os.path.join(root, f)))
        while size > limit * max_parts and by_size:
            name = by_size.pop()
            keep.remove(name)
            left_out.append(name)
            size = write(keep)
    for stale in existing_parts(out) + ([out] if os.path.exists(out) else []):
        os.remove(stale)  # an earlier pack's archive or parts would mix with this one
    if size <= limit:
        os.replace(tmp, out)
        written = out
    else:
        with open(tmp, "rb") as whole:
            i = 0
            while chunk := whole.read(limit):
                with open(part_name(out, i), "wb") as part:
                    part.write(chunk)
                i += 1
        os.remove(tmp)
        written = f"{part_name(out, 0)} ... {part_name(out, i - 1)} ({i} parts of at most {limit_mib} MiB)"
    print(f"packed {len(keep)} files of {root} into {written} ({size / 2**20:.1f} MiB)")
    if older:
        n = len(older)
        print(f"left out of the pack: {n} older checkpoint{'s' if n > 1 else ''} (the newest of each run continues it)")
    if finished:
        n = len(finished)
        print(f"left out of the pack: {n} checkpoint{'s' if n > 1 else ''} of finished runs")
    for name in left_out:
        print(f"left out of the pack (over {max_parts} × {limit_mib} MiB): {name}")


def restore(archive_path, root):
    if os.path.exists(archive_path):
        source, what = open(archive_path, "rb"), archive_path
    else:
        parts = existing_parts(archive_path)
        if not parts:
            sys.exit(f"{archive_path}: no such file, nor its parts {part_name(archive_path, 0)}, ...")
        source, what = tempfile.TemporaryFile(), f"{parts[0]} ... {parts[-1]} ({len(parts)} parts)"
        for p in parts:
            with open(p, "rb") as part:
                shutil.copyfileobj(part, source)
        source.seek(0)
    os.makedirs(root, exist_ok=True)
    with source, tarfile.open(fileobj=source, mode="r:*") as archive:
        members = archive.getmembers()
        for m in members:
            parts = m.name.split("/")
            if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
                sys.exit(f"{archive_path}: {m.name} is not a plain file or folder inside the archive")
        if hasattr(tarfile, "data_filter"):
            archive.extractall(root, members=members, filter="data")
        else:
            archive.extractall(root, members=members)
    print(f"restored {sum(m.isfile() for m in members)} files of {what} into {root}")


def main(argv):
    if (len(argv) == 6 and argv[1] == "pack" and argv[4].isdigit() and int(argv[4]) > 0
            and argv[5].isdigit() and int(argv[5]) > 0):
        pack(argv[2], argv[3], int(argv[4]), int(argv[5]))
    elif len(argv) == 4 and argv[1] == "restore":
        restore(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
