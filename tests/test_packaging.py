"""The distribution installs one import name, ``sgm``, and every sub-package of the source tree."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_source_package_is_listed_under_sgm():
    setuptools = PYPROJECT["tool"]["setuptools"]
    folders = setuptools["package-dir"]
    assert set(folders) == {"sgm.model", "sgm.stream", "sgm.consumers"}
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]))
    assert found == set(setuptools["packages"]), "list every sub-package in pyproject.toml [tool.setuptools] packages"


def test_built_wheel_has_one_top_level_name(tmp_path):
    """What ``pip install .`` puts into site-packages: ``sgm/`` and the metadata, nothing else."""
    source = tmp_path / "source"  # a copy: building in the checkout would leave build/ behind
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in PYPROJECT["tool"]["setuptools"]["package-dir"].values():
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("sgm_stream-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
    assert top_level == ["sgm"]
    tops = {name.split("/")[0] for name in names}
    assert tops == {"sgm", dist_info}
    assert {"sgm/model/mnb.py", "sgm/stream/records.py", "sgm/consumers/cli.py"} <= set(names)
    assert not any(name.startswith(("sgm/tests", "sgm/bench")) for name in names)
