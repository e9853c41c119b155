#!/usr/bin/env python3
"""Interop of `df11 download` with the real huggingface_hub on one shared hub cache.

Both download a small repo served by tests/hub fake_hub on 127.0.0.1; each must find and reuse
what the other wrote (the cache layout of daemon/hub/cache.h), offline too, and both at once.

  DF11_TOOL=build/tools/df11 FAKE_HUB=build/tests/hub/fake_hub \
      build/venv-hub/bin/python3 tests/hub/interop_test.py -v

huggingface_hub runs in child processes: it reads HF_ENDPOINT and HF_HUB_OFFLINE at import.
"""

import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

REPO = "org/name"
REPO_FOLDER = "models--org--name"
# Nothing listens on port 1: any network use by a client pointed here fails at once.
DEAD_ENDPOINT = "http://127.0.0.1:1"
CACHEDIR_TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
COMMAND_TIMEOUT = 120  # seconds, for any one child process
LFS_FILES = {"model.safetensors"}  # fake_hub serves *.safetensors through LFS

# Runs in a child Python: downloads or looks up REQUEST (JSON, argv[1]); prints the paths as JSON.
HF_CHILD = r"""
import json, sys
import huggingface_hub as hh
req = json.loads(sys.argv[1])
out = {"snapshot": hh.snapshot_download(
    req["repo"], cache_dir=req["cache"], local_files_only=req["local_only"])}
out["files"] = {f: hh.hf_hub_download(req["repo"], f, cache_dir=req["cache"],
                                      local_files_only=req["local_only"])
                for f in req["files"]}
if req.get("scan"):
    info = hh.scan_cache_dir(req["cache"])
    out["scan"] = {
        "warnings": [str(w) for w in info.warnings],
        "incomplete": [str(f.file_path) for f in info.incomplete_files],
        "repos": [{"repo_id": r.repo_id, "repo_type": r.repo_type, "nb_files": r.nb_files,
                   "size_on_disk": r.size_on_disk,
                   "revisions": [{"commit": v.commit_hash, "refs": sorted(v.refs),
                                  "snapshot": str(v.snapshot_path),
                                  "files": sorted(f.file_name for f in v.files)}
                                 for v in r.revisions]}
                  for r in info.repos],
    }
print(json.dumps(out))
"""


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def clean_env(**extra):
    """The environment without any hub or proxy setting of the caller's, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("HF_", "HUGGINGFACE_")) or k.lower().endswith("_proxy")
                   or k in ("TRANSFORMERS_OFFLINE", "DO_NOT_TRACK"))}
    env.update(extra)
    return env


class InteropTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.df11 = os.environ.get("DF11_TOOL", "")
        cls.fake_hub = os.environ.get("FAKE_HUB", "")
        for name, path in (("DF11_TOOL", cls.df11), ("FAKE_HUB", cls.fake_hub)):
            if not os.access(path, os.X_OK):
                raise RuntimeError(f"{name} must name an executable (got '{path}')")
        # The children run this interpreter, so it must be the venv's.
        if importlib.util.find_spec("huggingface_hub") is None:
            raise RuntimeError(f"no huggingface_hub in {sys.executable}; run it with the venv of "
                               "tools/install-test-python.sh")

    def setUp(self):
        # Resolved, because huggingface_hub resolves cache_dir and the paths must compare equal.
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="df11-interop-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.hub_proc = None
        self.addCleanup(self.stop_hub)
        # HF_HOME inside tmp: no token or cache of the machine's is read.
        self.hf_home = os.path.join(self.tmp, "hf-home")
        self.source = os.path.join(self.tmp, "repo")
        rng = random.Random(11)  # fixed: a failure reproduces with the same bytes
        self.files = {
            "config.json": json.dumps({"model_type": "llama", "hidden_size": 64}).encode(),
            "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE"}}).encode(),
            "model.safetensors": rng.randbytes(3 * 1024 * 1024 + 517),
            "sub/notes.txt": b"nested file\n",
        }
        for path, data in self.files.items():
            full = os.path.join(self.source, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        self.etags = {p: hashlib.sha256(d).hexdigest() if p in LFS_FILES else git_blob_sha1(d)
                      for p, d in self.files.items()}

    # --- processes -------------------------------------------------------------------------

    def start_hub(self, throttle=0):
        port_file = os.path.join(self.tmp, "port")
        args = [self.fake_hub, "--repo", f"{REPO}={self.source}", "--port-file", port_file]
        if throttle:
            args += ["--throttle", str(throttle)]
        self.hub_proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            self.assertIsNone(self.hub_proc.poll(), "fake_hub exited before serving")
            self.assertLess(time.monotonic(), deadline, "fake_hub did not start in 30 s")
            time.sleep(0.05)
        with open(port_file) as f:
            self.endpoint = f.read().strip()
        # The commit the hub reports, independently of either client. No proxy for loopback.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{self.endpoint}/api/models/{REPO}/revision/main", timeout=10) as r:
            self.commit = json.load(r)["sha"]
        self.assertRegex(self.commit, r"^[0-9a-f]{40}$")

    def stop_hub(self):
        if self.hub_proc is None:
            return
        if self.hub_proc.poll() is None:
            self.hub_proc.terminate()
            try:
                self.hub_proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.hub_proc.kill()
                self.hub_proc.wait(timeout=15)
        self.hub_proc = None

    def df11_args(self, cache):
        return [self.df11, "download", REPO, "--quiet"] + (["--cache-dir", cache] if cache else [])

    def df11_env(self, endpoint, offline=False, **extra):
        env = clean_env(HF_ENDPOINT=endpoint, HF_HOME=self.hf_home, **extra)
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def hf_args(self, cache, local_only, files=(), scan=False):
        req = {"repo": REPO, "cache": cache, "local_only": local_only, "files": list(files),
               "scan": scan}
        return [sys.executable, "-c", HF_CHILD, json.dumps(req)]

    def hf_env(self, endpoint, offline=False):
        env = clean_env(HF_ENDPOINT=endpoint, HF_HOME=self.hf_home, HF_HUB_DISABLE_XET="1",
                        HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def run_ok(self, what, args, env):
        """Runs a child to completion; returns its stdout, failing the test on a non-zero exit."""
        try:
            p = subprocess.run(args, env=env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            self.fail(f"{what}: no exit in {COMMAND_TIMEOUT} s; stderr:\n{e.stderr}")
        self.assertEqual(p.returncode, 0, f"{what} failed; stderr:\n{p.stderr}")
        return p.stdout

    def df11_download(self, what, cache, env):
        out = self.run_ok(what, self.df11_args(cache), env)
        lines = out.splitlines()
        self.assertTrue(lines, f"{what}: no output")
        return lines[-1]

    def hf_run(self, what, cache, endpoint, local_only=False, offline=False, files=(),
               scan=False):
        out = self.run_ok(what, self.hf_args(cache, local_only, files, scan),
                          self.hf_env(endpoint, offline))
        return json.loads(out.splitlines()[-1])

    # --- checks ----------------------------------------------------------------------------

    def storage(self, cache):
        return os.path.join(cache, REPO_FOLDER)

    def snapshot_dir(self, cache):
        return os.path.join(self.storage(cache), "snapshots", self.commit)

    def blob_inodes(self, cache):
        blobs = os.path.join(self.storage(cache), "blobs")
        return {n: os.stat(os.path.join(blobs, n)).st_ino for n in os.listdir(blobs)}

    def check_cache(self, cache):
        """The cache holds exactly the repo at self.commit, laid out as huggingface_hub does."""
        storage = self.storage(cache)
        with open(os.path.join(storage, "refs", "main"), "rb") as f:
            self.assertEqual(f.read(), self.commit.encode(), "refs/main")
        self.assertEqual(os.listdir(os.path.join(storage, "snapshots")), [self.commit])
        snapshot = self.snapshot_dir(cache)
        for path, data in self.files.items():
            link = os.path.join(snapshot, path)
            self.assertTrue(os.path.islink(link), f"{path} is not a symlink")
            # Relative: one ../ per directory below the repo folder.
            want = "../" * (2 + path.count("/")) + "blobs/" + self.etags[path]
            self.assertEqual(os.readlink(link), want, f"symlink of {path}")
            with open(link, "rb") as f:
                self.assertEqual(f.read(), data, f"bytes of {path}")
        # Each blob once, under its etag, and nothing else (no temporary files).
        self.assertEqual(sorted(os.listdir(os.path.join(storage, "blobs"))),
                         sorted(set(self.etags.values())))
        leftovers = [os.path.join(d, n) for d, _, names in os.walk(cache) for n in names
                     if ".incomplete" in n]
        self.assertEqual(leftovers, [], "temporary files left in the cache")
        with open(os.path.join(cache, "CACHEDIR.TAG")) as f:
            self.assertTrue(f.read().startswith(CACHEDIR_TAG_SIGNATURE), "CACHEDIR.TAG")

    def check_hf_result(self, result, cache):
        self.assertEqual(result["snapshot"], self.snapshot_dir(cache))
        for path, got in result["files"].items():
            self.assertEqual(got, os.path.join(self.snapshot_dir(cache), path), path)
            with open(got, "rb") as f:
                self.assertEqual(f.read(), self.files[path], f"bytes of {path}")

    # --- tests -----------------------------------------------------------------------------

    def test_df11_download_read_by_huggingface_hub(self):
        self.start_hub()
        cache = os.path.join(self.tmp, "cache")
        snapshot = self.df11_download("df11 download", cache, self.df11_env(self.endpoint))
        self.assertEqual(snapshot, self.snapshot_dir(cache))
        self.check_cache(cache)

        # The hub stays up, but Python is pointed at a dead port: only the cache can answer.
        result = self.hf_run("huggingface_hub local_files_only", cache, DEAD_ENDPOINT,
                             local_only=True, files=self.files, scan=True)
        self.check_hf_result(result, cache)
        # scan_cache_dir sees one sound repo with the one revision df11 wrote.
        scan = result["scan"]
        self.assertEqual(scan["warnings"], [])
        self.assertEqual(scan["incomplete"], [])
        self.assertEqual(len(scan["repos"]), 1)
        repo = scan["repos"][0]
        self.assertEqual((repo["repo_id"], repo["repo_type"]), (REPO, "model"))
        self.assertEqual(repo["nb_files"], len(self.files))
        self.assertEqual(repo["size_on_disk"], sum(len(d) for d in self.files.values()))
        self.assertEqual(repo["revisions"], [{
            "commit": self.commit, "refs": ["main"], "snapshot": self.snapshot_dir(cache),
            "files": sorted(os.path.basename(p) for p in self.files)}])

        result = self.hf_run("huggingface_hub HF_HUB_OFFLINE=1", cache, DEAD_ENDPOINT,
                             offline=True, files=self.files)
        self.check_hf_result(result, cache)

        # Online, Python finds everything in place and downloads nothing again.
        before = self.blob_inodes(cache)
        result = self.hf_run("huggingface_hub online", cache, self.endpoint, files=self.files)
        self.check_hf_result(result, cache)
        self.assertEqual(self.blob_inodes(cache), before, "huggingface_hub replaced blobs")
        self.check_cache(cache)

    def test_huggingface_hub_download_read_by_df11(self):
        self.start_hub()
        cache = os.path.join(self.tmp, "cache")
        result = self.hf_run("huggingface_hub snapshot_download", cache, self.endpoint)
        self.assertEqual(result["snapshot"], self.snapshot_dir(cache))
        self.check_cache(cache)
        before = self.blob_inodes(cache)

        stopped = self.endpoint
        self.stop_hub()
        # Offline, with the cache named by HF_HUB_CACHE rather than --cache-dir.
        snapshot = self.df11_download("df11 download HF_HUB_OFFLINE=1", None,
                                      self.df11_env(stopped, offline=True, HF_HUB_CACHE=cache))
        self.assertEqual(snapshot, self.snapshot_dir(cache))
        # Online but the hub is gone: the cache answers (after df11's retries, about 23 s).
        snapshot = self.df11_download("df11 download, hub unreachable", cache,
                                      self.df11_env(stopped))
        self.assertEqual(snapshot, self.snapshot_dir(cache))
        self.check_cache(cache)
        self.assertEqual(self.blob_inodes(cache), before, "df11 replaced blobs")

    def test_concurrent_downloads_into_one_cache(self):
        # Throttled (about 1.5 s for the big file) so that both are downloading at once.
        self.start_hub(throttle=2 * 1024 * 1024)
        cache = os.path.join(self.tmp, "cache")
        procs = {
            "df11": subprocess.Popen(self.df11_args(cache), env=self.df11_env(self.endpoint),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
            "huggingface_hub": subprocess.Popen(
                self.hf_args(cache, local_only=False), env=self.hf_env(self.endpoint),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        }
        outputs = {}
        try:
            for name, p in procs.items():
                out, err = p.communicate(timeout=COMMAND_TIMEOUT)
                self.assertEqual(p.returncode, 0, f"{name} failed; stderr:\n{err}")
                outputs[name] = (out.splitlines() or [""])[-1]
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.communicate(timeout=15)
        self.assertEqual(outputs["df11"], self.snapshot_dir(cache))
        self.assertEqual(json.loads(outputs["huggingface_hub"])["snapshot"],
                         self.snapshot_dir(cache))
        self.check_cache(cache)


if __name__ == "__main__":
    unittest.main()
