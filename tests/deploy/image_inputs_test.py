#!/usr/bin/env python3
"""The container image's runtime stage, checked from the Containerfile's own inputs where no base
image can be pulled: every shared library df11d, df11ctl and df11 load (their ldd closure on this
Debian 12 build) comes from a package that deploy/runtime-packages.txt or
deploy/cuda-runtime-packages.txt lists, every listed package provides one of them, no compiler or
-dev package is listed, and the Containerfile's runtime stage installs those lists, copies the
three binaries and runs df11d as a non-root user. The CUDA list is checked against CUDA builds
only: the CPU image does not install it.

Environment: DF11D_BINARY, DF11CTL_BINARY, DF11_TOOL (the built binaries); DF11_CUDA_BUILD (1 or 0:
whether they were built with CUDA).
"""
import os
import re
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
BINARIES = {name: os.environ.get(var) for name, var in
            [("df11d", "DF11D_BINARY"), ("df11ctl", "DF11CTL_BINARY"), ("df11", "DF11_TOOL")]}
# Packages the image needs for something other than a library: TLS roots for the hub.
NOT_LIBRARIES = {"ca-certificates"}
# NVIDIA's package for each CUDA library a binary may load ({V}: 13-0 for CUDA 13.0).
CUDA_PACKAGES = {"libcublas": "libcublas-{V}", "libcublasLt": "libcublas-{V}",
                 "libcudart": "cuda-cudart-{V}", "libnvrtc": "cuda-nvrtc-{V}",
                 "libnvJitLink": "libnvjitlink-{V}", "libcusparse": "libcusparse-{V}",
                 "libcurand": "libcurand-{V}", "libnccl": "libnccl2"}


def package_list(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return {p for line in f for p in line.split("#")[0].split()}


def ldd_closure(binary):
    """The resolved paths of the shared libraries `binary` loads."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    missing = [line.strip() for line in out.splitlines() if "not found" in line]
    if missing:
        raise AssertionError(f"{binary}: {missing}")
    return {m.group(1) for m in re.finditer(r"=> (/\S+)", out)}


def debian_package(path):
    """The installed package that ships `path` (merged /usr: dpkg may record either spelling)."""
    candidates = [path, os.path.realpath(path)]
    candidates += [("/usr" + p) if not p.startswith("/usr/") else p[len("/usr"):]
                   for p in list(candidates)]
    for candidate in candidates:
        r = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def cuda_package(path):
    """NVIDIA's package for a library under a CUDA toolkit, with {V} kept."""
    stem = os.path.basename(path).split(".so")[0]
    return CUDA_PACKAGES.get(stem)


class ImageInputsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.debian = package_list("runtime-packages.txt")
        cls.cuda = package_list("cuda-runtime-packages.txt")
        libraries = set()
        for name, binary in BINARIES.items():
            if not binary:
                raise unittest.SkipTest(f"the {name} binary is not given")
            libraries |= ldd_closure(binary)
        cls.providers = {}  # package -> a library it provides
        cls.unowned = []
        for lib in sorted(libraries):
            package = cuda_package(lib) if "/cuda" in lib else debian_package(lib)
            if package is None:
                cls.unowned.append(lib)
            else:
                cls.providers.setdefault(package, lib)

    def test_every_library_comes_from_a_listed_package(self):
        self.assertEqual(self.unowned, [], "libraries no known package provides")
        for package, lib in sorted(self.providers.items()):
            listed = self.cuda if "{V}" in package or package == "libnccl2" else self.debian
            self.assertIn(package, listed, f"{lib}: add {package} to deploy/")

    def test_every_listed_package_provides_a_library(self):
        # The CUDA list is for the CUDA image: binaries built without CUDA load none of it.
        cuda_build = os.environ.get("DF11_CUDA_BUILD", "1") == "1"
        listed = self.debian | (self.cuda if cuda_build else set())
        unused = listed - set(self.providers) - NOT_LIBRARIES
        self.assertEqual(unused, set(), "listed but no binary loads from them")

    def test_no_compiler_or_development_package(self):
        for package in self.debian | self.cuda:
            self.assertNotRegex(package, r"-dev$|^(gcc|g\+\+|clang|cmake|build-essential|cuda-nvcc)")

    def test_the_runtime_stage_installs_the_lists_and_runs_df11d_unprivileged(self):
        with open(os.path.join(DEPLOY, "Containerfile")) as f:
            text = re.sub(r"\\\n", " ", f.read())
        stages = re.split(r"^FROM ", text, flags=re.M)[1:]
        self.assertGreaterEqual(len(stages), 2, "a build stage and a runtime stage")
        runtime = stages[-1]
        self.assertIn("deploy/runtime-packages.txt", runtime)
        self.assertIn("tools/install-cuda.sh", runtime)
        self.assertIn("deploy/cuda-runtime-packages.txt", runtime)
        for name in BINARIES:
            self.assertRegex(runtime, rf"COPY --from=build \S*/{name} ")
        user = re.search(r"^USER (\S+)", runtime, flags=re.M)
        self.assertIsNotNone(user)
        self.assertNotIn(user.group(1).split(":")[0], ("0", "root"))
        self.assertRegex(runtime, r'ENTRYPOINT \["/usr/local/bin/df11d"\]')
        # Nothing compiles in the runtime stage.
        self.assertNotRegex(runtime, r"install-deps\.sh|cmake|install-cuda\.sh build")


if __name__ == "__main__":
    unittest.main(verbosity=2)
