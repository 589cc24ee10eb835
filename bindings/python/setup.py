"""Packaging hooks (the metadata is in pyproject.toml).

The wheel carries libappnorth.so, so it is a platform wheel
(``py3-none-<platform>``: ctypes, no extension module, any Python 3).
``build_py`` puts the library into the package folder, taken from, in order:

1. ``APPNORTH_LIBRARY`` (a built libappnorth.so; ``make wheel`` sets it);
2. the checkout this folder sits in: ``make dist`` when a Swift toolchain
   is on PATH, else a ``dist/lib`` built earlier;

and otherwise stops with a message that says what to do. Editable installs
(``pip install -e``) skip this: the package then loads the checkout's build.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
HOW_TO = (
    "Build the library first and point APPNORTH_LIBRARY at it, e.g.\n"
    "  make dist && APPNORTH_LIBRARY=$PWD/dist/lib pip install bindings/python\n"
    "in a libappnorth checkout with Swift 6.3 or later on PATH, or install "
    "the prebuilt wheel (make wheel; pip install dist/appnorth-*.whl).")


def _fail(reason: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    sys.stderr.write(f"appnorth: cannot package libappnorth.so: {reason}\n{HOW_TO}\n")
    raise SystemExit(1)


def _from_env(value: str) -> str:
    path = os.path.expanduser(value)
    if os.path.isdir(path):
        found = sorted(glob.glob(os.path.join(path, "libappnorth.so*")))
        if not found:
            _fail(f"APPNORTH_LIBRARY={value} is a folder without libappnorth.so*")
        path = found[0]
    if not os.path.isfile(path):
        _fail(f"APPNORTH_LIBRARY={value} does not exist")
    return os.path.realpath(path)


def find_library() -> str:
    """The built libappnorth.so to ship (see the module docstring)."""
    explicit = os.environ.get("APPNORTH_LIBRARY")
    if explicit:
        return _from_env(explicit)
    if not os.path.isfile(os.path.join(CHECKOUT, "Package.swift")):
        _fail("this source tree is not inside a libappnorth checkout and APPNORTH_LIBRARY is not set")
    if shutil.which("swift"):
        sys.stderr.write(f"appnorth: building libappnorth.so with `make dist` in {CHECKOUT}\n")
        if subprocess.call(["make", "-C", CHECKOUT, "dist"], stdout=sys.stderr) != 0:
            _fail(f"`make dist` failed in {CHECKOUT} (see above)")
    built = os.path.join(CHECKOUT, "dist", "lib", "libappnorth.so")
    if not os.path.exists(built):
        _fail(f"no Swift toolchain on PATH and no {built} built earlier")
    return os.path.realpath(built)


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = os.path.join(self.build_lib, "appnorth")
        if glob.glob(os.path.join(target, "libappnorth.so*")):
            return  # copied into the source folder by hand: shipped as is
        shutil.copy2(find_library(), os.path.join(target, "libappnorth.so.0"))


class PlatformWheel(bdist_wheel):
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):  # type: ignore[no-untyped-def]
        _, _, platform = super().get_tag()
        return "py3", "none", platform


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel}, distclass=BinaryDistribution)
