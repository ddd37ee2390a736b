#!/usr/bin/env python3
"""pack.py: scripts/gpu/run.sh's results archive, with python3 alone (a GPU machine may have
no xz tool).

  pack.py pack RESULTS FILE LIMIT_MIB   RESULTS' files into FILE (tar.xz, names relative to
                                        RESULTS). An archive over LIMIT_MIB is packed again
                                        without the checkpoints, then without the largest
                                        files until it fits; each file left out is named.
  pack.py restore FILE RESULTS          FILE unpacked into RESULTS (regular files and folders
                                        only, nothing outside RESULTS).
"""
import os
import sys
import tarfile


def pack(root, out, limit_mib):
    limit = limit_mib * 1024 * 1024
    files = []
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(folder, name)
            if os.path.abspath(path) in (os.path.abspath(out), os.path.abspath(out) + ".part"):
                continue  # the archive itself, where it is written inside RESULTS
            if name == ".ldtorch.lock":
                continue  # a run's lock names a process of this machine
            if os.path.isfile(path) and not os.path.islink(path):
                files.append(os.path.relpath(path, root))
    part = out + ".part"

    def write(keep):
        with tarfile.open(part, "w:xz") as archive:
            for name in sorted(keep):
                archive.add(os.path.join(root, name), arcname=name, recursive=False)
        return os.path.getsize(part)

    keep = list(files)
    size = write(keep)
    left_out = []
    if size > limit:
        # Checkpoints only serve a run continued elsewhere; the results are the rest.
        left_out = [f for f in keep if "checkpoints" in f.split(os.sep)]
        keep = [f for f in keep if f not in left_out]
        size = write(keep)
        by_size = sorted(keep, key=lambda f: os.path.getsize(os.path.join(root, f)))
        while size > limit and by_size:
            name = by_size.pop()
            keep.remove(name)
            left_out.append(name)
            size = write(keep)
    os.replace(part, out)
    print(f"packed {len(keep)} files of {root} into {out} ({size / 2**20:.1f} MiB)")
    for name in left_out:
        print(f"left out of the pack (over {limit_mib} MiB): {name}")


def restore(archive_path, root):
    os.makedirs(root, exist_ok=True)
    with tarfile.open(archive_path, "r:*") as archive:
        members = archive.getmembers()
        for m in members:
            parts = m.name.split("/")
            if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
                sys.exit(f"{archive_path}: {m.name} is not a plain file or folder inside the archive")
        if hasattr(tarfile, "data_filter"):
            archive.extractall(root, members=members, filter="data")
        else:
            archive.extractall(root, members=members)
    print(f"restored {sum(m.isfile() for m in members)} files of {archive_path} into {root}")


def main(argv):
    if len(argv) == 5 and argv[1] == "pack" and argv[4].isdigit() and int(argv[4]) > 0:
        pack(argv[2], argv[3], int(argv[4]))
    elif len(argv) == 4 and argv[1] == "restore":
        restore(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
