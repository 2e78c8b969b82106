"""Output files of the long-running commands (``sgm tune``, ``sgm ensemble``, ``sgm eval``), checked up front.

They write their results when a search or fit that can take minutes is done: a folder that does not exist or
cannot be written is refused before any work, in one line, instead of a traceback after it.
"""
from __future__ import annotations

import os
from pathlib import Path


def check_output_paths(*paths: str | None) -> None:
    """Raise ``ValueError`` (one line) when a given output path's folder is missing or not writable.

    ``None`` and ``"-"`` (standard output) are skipped.

    >>> check_output_paths(None, "-")
    >>> check_output_paths("/no/such/folder/out.json")
    Traceback (most recent call last):
    ...
    ValueError: /no/such/folder/out.json: the folder /no/such/folder does not exist
    """
    for path in paths:
        if path is None or path == "-":
            continue
        folder = Path(path).expanduser().absolute().parent
        if not folder.is_dir():
            raise ValueError(f"{path}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise ValueError(f"{path}: the folder {folder} is not writable")
