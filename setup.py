"""Builds vela's Python extension with the project's CMake (see pyproject.toml).

Environment:
  VELA_CMAKE_BUILD_DIR  an already configured CMake build tree: build the targets there instead
                        of configuring a fresh one (much faster; the tests use it).
  VELA_BUILD_JOBS       parallel build jobs (default: all CPUs).
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Builds the `_vela` and `vela` targets and places them in the package: the extension as
    vela/_vela*.so, the CLI as vela/bin/vela (for `python -m vela serve`)."""

    def build_extension(self, ext: Extension) -> None:
        build_dir = os.environ.get("VELA_CMAKE_BUILD_DIR")
        if not build_dir:
            build_dir = os.path.join(os.path.abspath(self.build_temp), "cmake")
            configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                         "-DVELA_BUILD_TESTS=OFF", "-DVELA_BUILD_PYTHON=ON",
                         f"-DPython_EXECUTABLE={sys.executable}"]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
            subprocess.check_call(configure)
        jobs = os.environ.get("VELA_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_vela", "vela",
                               "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "vela", "_vela*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one built extension in {build_dir}/python/vela, "
                               f"found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)
        bin_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "tools", "vela"), os.path.join(bin_dir, "vela"))


os.makedirs(os.path.join(ROOT, "build", "pip"), exist_ok=True)
setup(
    ext_modules=[CMakeExtension("vela._vela")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build folders stay under build/pip, beside the CMake presets' trees.
    options={"build": {"build_base": os.path.join("build", "pip")},
             "egg_info": {"egg_base": os.path.join("build", "pip")}},
)
