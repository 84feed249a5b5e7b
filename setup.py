"""`pip install .`: the C++ extension twinpipe._twinpipe is built by the
project's CMake (the target python/CMakeLists.txt defines), in build-pip/,
with the Python running pip; pyproject.toml holds the rest.

Environment: CMAKE_ARGS (extra configure arguments, e.g. a compiler
launcher), TWINPIPE_BUILD_JOBS (parallel jobs, default all cores)."""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = ROOT / "build-pip" / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.run(configure, check=True)
        jobs = os.environ.get("TWINPIPE_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_twinpipe", "-j", jobs], check=True)
        built = sorted((build_dir / "python" / "twinpipe").glob("_twinpipe*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _twinpipe module in {build_dir}/python/twinpipe: is pybind11-dev "
                               "installed (make deps)? The configure output says whether it found it.")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], target)


setup(ext_modules=[CMakeExtension("twinpipe._twinpipe")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build-pip"}})
