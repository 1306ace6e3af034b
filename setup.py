"""Where needlescope's packages are, found rather than listed (metadata: pyproject.toml).

The layout puts ``flows/``, ``tasks/`` and ``warehouse/`` at the top, beside the core
``needlescope/``; all four install as one package, ``needlescope``, the three folders as its
subpackages, so nothing installs a bare top-level ``flows`` or ``tasks`` (docs/architecture.md).
This mapping is the one place that says so; tests/layout/test_import_rules.py reads it here.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "needlescope": "needlescope",
    "needlescope.flows": "flows",
    "needlescope.tasks": "tasks",
    "needlescope.warehouse": "warehouse",
}


def packages() -> list[str]:
    """Each folder's package and every package below it."""
    found = []
    for package, folder in FOLDERS.items():
        found += [package, *(f"{package}.{sub}" for sub in find_packages(folder))]
    return found


if __name__ == "__main__":  # as the build backend runs it; tests import packages() alone
    setup(package_dir=FOLDERS, packages=packages())
