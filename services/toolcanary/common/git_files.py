"""Check that files on disk are the files of a git commit, by hashing every object from the commit down.

A commit id is a hash of the commit object, which names its tree by hash, which names each file's blob by
hash: reading that chain from the checkout's own object store, re-hashing each object read, and hashing
each file on disk the way git hashes a blob ties the files to the commit id, whatever the folder's `.git`
claims. A `HEAD` that names the commit without its objects, or objects that do not hash to their names,
fail. Loose and packed objects (pack index v2, both delta kinds) and `objects/info/alternates` are read with
the standard library alone, so every image can run the check without a git binary.

    problems = files_at_commit(Path("TRUSTEE"), "daf72679...", ["verl/recipe/trustee/simulator.py"])
    # [] when every file is byte for byte the commit's; else one sentence per file or missing object
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import struct
import zlib
from pathlib import Path

_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA, _REF_DELTA = 6, 7


def git_folder(root: Path) -> Path | None:
    """The git metadata folder of a checkout (a `.git` folder, or the folder a `.git` file points at)."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: ".git" names the real folder
        text = git.read_text(encoding="utf-8").strip()
        if not text.startswith("gitdir:"):
            return None
        git = (root / text.removeprefix("gitdir:").strip()).resolve()
    return git if git.is_dir() else None


def head_commit(root: Path) -> str | None:
    """The commit a git checkout's HEAD names, read from its files (no git binary needed); None if not git.
    Only a claim: `files_at_commit` verifies the files against it."""
    git = git_folder(root)
    head_file = git / "HEAD" if git else None
    if head_file is None or not head_file.is_file():
        return None
    head = head_file.read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head
    ref = head.removeprefix("ref:").strip()
    common = git / "commondir"
    bases = [git] + ([(git / common.read_text(encoding="utf-8").strip()).resolve()] if common.is_file() else [])
    for base in bases:
        loose = base / ref
        if loose.is_file():
            return loose.read_text(encoding="utf-8").strip()
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref:
                    return sha
    return None


def _blob_id(path: Path) -> str:
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Pack:
    """One pack file and its version-2 index, read on demand."""

    def __init__(self, index: Path) -> None:
        data = index.read_bytes()
        if data[:8] != b"\xfftOc\x00\x00\x00\x02":
            raise ValueError(f"{index}: not a version-2 pack index")
        count = struct.unpack_from(">I", data, 8 + 255 * 4)[0]
        ids_at = 8 + 256 * 4
        self.ids = [data[ids_at + 20 * i: ids_at + 20 * (i + 1)] for i in range(count)]
        offsets_at = ids_at + 24 * count  # ids, then one CRC32 per object
        self._small = data[offsets_at: offsets_at + 4 * count]
        self._large = data[offsets_at + 4 * count:]
        with index.with_suffix(".pack").open("rb") as handle:
            self.pack = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def offset_of(self, object_id: bytes) -> int | None:
        at = bisect.bisect_left(self.ids, object_id)
        if at == len(self.ids) or self.ids[at] != object_id:
            return None
        offset = struct.unpack_from(">I", self._small, 4 * at)[0]
        if offset & 0x80000000:  # the index's table of 64-bit offsets
            offset = struct.unpack_from(">Q", self._large, 8 * (offset & 0x7FFFFFFF))[0]
        return offset

    def _inflate(self, at: int) -> bytes:
        inflater, out = zlib.decompressobj(), []
        while not inflater.eof:
            chunk = self.pack[at: at + 65536]
            if not chunk:
                raise ValueError("a pack object ends before its compressed data does")
            out.append(inflater.decompress(chunk))
            at += len(chunk)
        return b"".join(out)

    def read(self, offset: int, objects: GitObjects) -> tuple[bytes, bytes]:
        """The object at `offset` as (type, content), its deltas applied."""
        deltas = []
        while True:
            byte = self.pack[offset]
            kind, at = (byte >> 4) & 7, offset + 1
            while byte & 0x80:  # the size's varint: the inflated data says its own size
                byte = self.pack[at]
                at += 1
            if kind == _OFS_DELTA:
                byte = self.pack[at]
                at += 1
                back = byte & 0x7F
                while byte & 0x80:
                    byte = self.pack[at]
                    at += 1
                    back = ((back + 1) << 7) | (byte & 0x7F)
                deltas.append(self._inflate(at))
                offset -= back
            elif kind == _REF_DELTA:
                base_id = self.pack[at: at + 20].hex()
                deltas.append(self._inflate(at + 20))
                base = objects.read(base_id)
                if base is None:
                    raise ValueError(f"the delta base {base_id} is missing")
                kind_name, content = base
                break
            elif kind in _TYPES:
                kind_name, content = _TYPES[kind], self._inflate(at)
                break
            else:
                raise ValueError(f"pack object type {kind} is unknown")
        for delta in reversed(deltas):
            content = _apply_delta(content, delta)
        return kind_name, content


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    source_size, at = _varint(delta, 0)
    target_size, at = _varint(delta, at)
    if source_size != len(base):
        raise ValueError("a delta's base has the wrong size")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:  # copy a range of the base: offset and size bytes present as the op's bits say
            offset = size = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= delta[at] << (8 * bit)
                    at += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    size |= delta[at] << (8 * bit)
                    at += 1
            out += base[offset: offset + (size or 0x10000)]
        elif op:  # insert the next `op` bytes
            out += delta[at: at + op]
            at += op
        else:
            raise ValueError("a delta holds the reserved instruction 0")
    if len(out) != target_size:
        raise ValueError("a delta produced the wrong size")
    return bytes(out)


class GitObjects:
    """The objects of one git folder (and its alternates); every object read is re-hashed against its id."""

    def __init__(self, git: Path) -> None:
        stores = [git / "objects"]
        alternates = git / "objects" / "info" / "alternates"
        if alternates.is_file():
            stores += [(stores[0] / line.strip()).resolve() for line in alternates.read_text().splitlines()
                       if line.strip() and not line.startswith("#")]
        self.loose = [store for store in stores if store.is_dir()]
        self.packs = [_Pack(index) for store in self.loose for index in sorted((store / "pack").glob("*.idx"))]

    def read(self, object_id: str) -> tuple[bytes, bytes] | None:
        """(type, content) of an object, or None where no store holds it.

        Raises:
            ValueError: an object that does not hash to its id, or a damaged pack.
        """
        found = None
        for store in self.loose:
            path = store / object_id[:2] / object_id[2:]
            if path.is_file():
                raw = zlib.decompress(path.read_bytes())
                header, _, content = raw.partition(b"\0")
                found = header.split(b" ")[0], content
                break
        else:
            for pack in self.packs:
                offset = pack.offset_of(bytes.fromhex(object_id))
                if offset is not None:
                    found = pack.read(offset, self)
                    break
        if found is None:
            return None
        kind, content = found
        if hashlib.sha1(kind + b" %d\0" % len(content) + content).hexdigest() != object_id:
            raise ValueError(f"object {object_id} does not hash to its id (a damaged or forged object store)")
        return found


def _tree_entries(content: bytes) -> dict[str, str]:
    entries, at = {}, 0
    while at < len(content):
        space, nul = content.index(b" ", at), content.index(b"\0", at)
        entries[content[space + 1: nul].decode("utf-8", "surrogateescape")] = content[nul + 1: nul + 21].hex()
        at = nul + 21
    return entries


def files_at_commit(root: Path, commit: str, paths: list[str]) -> list[str]:
    """What keeps the files `paths` (relative, `/`-separated) of the checkout at `root` from being, byte for byte,
    the files of `commit`: one sentence each; empty when they are."""
    git = git_folder(root)
    if git is None:
        return [f"{root} has no git metadata (.git)"]
    try:
        objects = GitObjects(git)
        found = objects.read(commit)
        if found is None or found[0] != b"commit":
            return [f"the object store under {git} does not hold commit {commit} (a .git that only names it)"]
        tree_id = found[1].split(b"\n", 1)[0].removeprefix(b"tree ").decode()
        problems, trees = [], {"": tree_id}
        for rel in paths:
            parent, _, name = rel.rpartition("/")
            entries = _tree_at(objects, trees, parent)
            if entries is None or name not in entries:
                problems.append(f"{rel} is not a file of commit {commit}")
            elif not (root / rel).is_file():
                problems.append(f"{rel} is missing from the checkout")
            elif _blob_id(root / rel) != entries[name]:
                problems.append(f"{rel} differs from commit {commit}'s (git blob {entries[name]})")
        return problems
    except (OSError, ValueError, zlib.error, IndexError, struct.error) as err:
        return [f"the object store under {git} cannot be read: {err}"]


def _tree_at(objects: GitObjects, trees: dict[str, str | dict], folder: str) -> dict[str, str] | None:
    """The entries of a folder of the commit's tree (cached in `trees` by folder), or None where it has none."""
    cached = trees.get(folder)
    if isinstance(cached, dict):
        return cached
    if cached is None:
        parent, _, name = folder.rpartition("/")
        entries = _tree_at(objects, trees, parent)
        if entries is None or name not in entries:
            return None
        cached = entries[name]
    found = objects.read(cached)
    if found is None or found[0] != b"tree":
        return None
    trees[folder] = _tree_entries(found[1])
    return trees[folder]
