"""The files of the command line: reading tensors and labels, fingerprinting queries,
and refusing outputs that would overwrite an input or write through a link.

Labels may be class names: a text file with one name per line (``.txt``, ``.csv``,
``.tsv`` or any other suffix that is not a tensor's), or a NumPy array of strings.
Names are mapped to integers by one vocabulary shared by the query and the gallery
labels (sorted names, so the same names always get the same integers).

Example:
    >>> query, gallery = encode_names(["cat", "dog"], ["dog", "eel", "cat"])
    >>> query.tolist(), gallery.tolist()
    ([0, 1], [1, 2, 0])
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch

from .. import optional

TENSOR_SUFFIXES = (".pt", ".npy", ".npz")


class CommandError(Exception):
    """A bad command line found after parsing (exit status 2)."""

Labels = Union[torch.Tensor, List[str]]


def _split_spec(spec: str) -> Tuple[str, str]:
    """``file.npz:name`` -> ``("file.npz", "name")``; any other spec -> ``(spec, "")``."""
    if spec.count(":") == 1 and not spec.startswith(":"):
        path, name = spec.split(":")
        if path.endswith(".npz"):
            return path, name
    return spec, ""


def is_tensor_file(spec: str) -> bool:
    return _split_spec(spec)[0].endswith(TENSOR_SUFFIXES)


def _numpy(path: str):
    return optional.numpy(path)


def load_array(spec: str) -> Labels:
    """A tensor from ``x.pt``, ``x.npy``, ``x.npz`` (one array) or ``x.npz:name``; a NumPy
    array of strings comes back as a list of names."""
    path, name = _split_spec(spec)
    if not path.endswith(TENSOR_SUFFIXES):
        raise ValueError(f"cannot read {spec!r}: expected a .pt, .npy or .npz file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    if path.endswith(".pt"):
        obj = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{path} must hold one tensor; got {type(obj).__name__}")
        return obj
    np = _numpy(path)
    try:
        data = np.load(path, allow_pickle=False)  # never unpickle: a file must not run code
        if path.endswith(".npz"):
            if not name:
                if len(data.files) != 1:
                    raise ValueError(f"{path} holds {data.files}; pick one as {path}:NAME")
                name = data.files[0]
            if name not in data.files:
                raise ValueError(f"{path} has no array {name!r}; it holds {data.files}")
            data = data[name]
    except ValueError as err:
        if "allow_pickle" not in str(err):
            raise
        raise ValueError(f"{spec} holds Python objects, which are never unpickled: save numbers, a NumPy "
                         "string array (np.array(names, dtype=str)), or class names in a text file, one per "
                         "line") from None
    if data.dtype.kind in "US":
        if data.ndim != 1:
            raise ValueError(f"{spec} holds names of shape {tuple(data.shape)}; class names are one per query (1-D)")
        return [str(x) for x in data.tolist()]
    if data.dtype.kind not in "biuf":
        raise ValueError(f"{spec} holds {data.dtype} values; expected numbers or strings")
    return torch.tensor(data)  # a copy: NumPy's read-only arrays give torch a warning otherwise


def load_tensor(spec: str) -> torch.Tensor:
    """:func:`load_array` for data that must be numbers (embeddings, ids, confidences)."""
    data = load_array(spec)
    if not isinstance(data, torch.Tensor):
        raise ValueError(f"{spec} holds strings; expected numbers")
    return data


def load_labels(spec: str) -> Labels:
    """Labels or categories: a tensor file, or a text file with one name per line (a list of str)."""
    if is_tensor_file(spec):
        return load_array(spec)
    if not os.path.exists(spec):
        raise FileNotFoundError(f"no such file: {spec}")
    try:
        with open(spec, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except UnicodeDecodeError:
        raise ValueError(f"{spec} is not UTF-8 text: labels are a .pt/.npy/.npz file or a text file "
                         "with one class name per line") from None


def encode_names(*label_sets: Optional[Labels]) -> List[Optional[torch.Tensor]]:
    """Each set of labels as a tensor: lists of names become int64 codes of one
    vocabulary shared by every set (sorted names); tensors pass unchanged, and
    mixing names with numeric labels is refused."""
    names = [s for s in label_sets if isinstance(s, list)]
    if names and len(names) != sum(s is not None for s in label_sets):
        raise ValueError("the query and gallery labels must both be numbers or both be class names")
    vocabulary = {n: i for i, n in enumerate(sorted({n for s in names for n in s}))}
    return [torch.tensor([vocabulary[n] for n in s], dtype=torch.int64) if isinstance(s, list) else s
            for s in label_sets]


def _first_appearance(values: List) -> List[int]:
    """Each value replaced by the rank of its first appearance: ``[7, 3, 7] -> [0, 1, 0]``."""
    codes: Dict[object, int] = {}
    return [codes.setdefault(v, len(codes)) for v in values]


def fingerprint(*parts: Optional[Labels]) -> str:
    """A SHA-256 of how the queries' labels (and ids), in order, split them into
    classes: two runs with equal fingerprints hold the same queries in the same
    order. Class labels are re-coded by first appearance, so class names and the
    numbers of another encoding of the same classes give the same fingerprint;
    ``[N, C]`` labels are hashed as they are.

    Example:
        >>> a = fingerprint(torch.tensor([0, 1, 1]))
        >>> a == fingerprint(torch.tensor([0, 1, 1])), a == fingerprint(torch.tensor([1, 0, 1]))
        (True, False)
        >>> a == fingerprint(["cat", "dog", "dog"]), a == fingerprint(torch.tensor([5, 2, 2]))
        (True, True)
    """
    digest = hashlib.sha256(b"partition;")
    for part in parts:
        if part is None:
            digest.update(b"none;")
            continue
        if isinstance(part, torch.Tensor) and part.ndim != 1:
            t = part.detach().cpu().contiguous()
            t = t.to(torch.float64 if t.is_floating_point() else torch.int64)
            digest.update(f"{t.dtype};{tuple(t.shape)};".encode() + t.numpy().tobytes())
            continue
        values = part.detach().cpu().tolist() if isinstance(part, torch.Tensor) else list(part)
        digest.update(f"classes;{len(values)};".encode() + ",".join(map(str, _first_appearance(values))).encode()
                      + b";")
    return digest.hexdigest()


def refuse_overwrite(outputs: Iterable[Union[str, Path]], inputs: Sequence[Optional[str]]) -> None:
    """Raise if an output path is one of the input files (a link to one included)."""
    files = {}
    for spec in inputs:
        if spec:
            path = Path(_split_spec(spec)[0])
            if path.exists():
                files[path.resolve()] = spec
    for out in outputs:
        target = Path(out).resolve()
        if target in files:
            raise ValueError(f"refusing to write {out}: it is the input {files[target]}; choose another file")
