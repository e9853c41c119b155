#!/usr/bin/env python3
"""Hub download and streaming-load benchmark on loopback, printed as one JSON object.

Makes a ~1 GB BF16 model (df11 synth, one shard per layer), serves it from the fake hub
(tests/hub/fake_hub) on 127.0.0.1 and measures, in one run:
  download_gbps           df11 download into an empty cache (unthrottled)
  cat_gbps                reading the cached snapshot (cat to /dev/null), page cache warm
  cached_load_gbps        df11ctl load of the cached hub id into a fresh df11d (load-to-ready)
  cached_load_vs_cat      the two above divided (target >= 0.80)
  throttled_download_s    df11 download at --throttle bytes/s into an empty cache
  throttled_load_s        df11ctl load from the hub at the same throttle into an empty cache
  overlap_ratio           throttled_load_s / throttled_download_s (target <= 1.15)
Both throttled runs use one connection (hub.max_connections: 1), so the shards arrive one
after another at the throttled rate, as from a hub limited to that total rate.

Usage: tools/bench_hub.py [--build build] [--layers 8] [--throttle 200000000] [--keep DIR]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_for_file(path, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        if proc.poll() is not None:
            sys.exit(f"bench_hub: {proc.args[0]} exited with {proc.returncode}")
        time.sleep(0.05)
    sys.exit(f"bench_hub: {path} did not appear")


def start_fake_hub(build, work, model, throttle):
    port_file = os.path.join(work, f"hub-{throttle}.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    args = [os.path.join(build, "tests/hub/fake_hub"), "--repo", f"bench/model={model}",
            "--port-file", port_file]
    if throttle:
        args += ["--throttle", str(throttle)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    wait_for_file(port_file, proc)
    with open(port_file) as f:
        return proc, f.read().strip()


def start_daemon(build, work, name, endpoint, cache, connections):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "config.yaml"), "w") as f:
        f.write(f"""listen: {{grpc: "127.0.0.1:0", http: ""}}
preload: []
hub: {{endpoint: "{endpoint}", cache_dir: "{cache}", max_connections: {connections}}}
""")
    proc = subprocess.Popen([os.path.join(build, "daemon/df11d"), "--config",
                             os.path.join(d, "config.yaml"), "--port-file",
                             os.path.join(d, "ports.json")],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
    wait_for_file(os.path.join(d, "ports.json"), proc)
    with open(os.path.join(d, "ports.json")) as f:
        return proc, f"127.0.0.1:{json.load(f)['grpc']}"


def parse_args(doc, prefix):
    """The options both benchmarks take, and their work directory (--keep, or a new one)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--throttle", type=int, default=200_000_000)
    p.add_argument("--keep", help="work directory to use and keep (default: a temporary one)")
    a = p.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    return a, work


def make_model(build, work, layers):
    """The benchmark model in work/model (made once: df11 synth, BF16, one shard per layer, the
    demo tokenizer), and its size in bytes."""
    model = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.run([os.path.join(build, "tools/df11"), "synth", model, "--layers",
                        str(layers), "--hidden", "2048", "--intermediate", "6144",
                        "--heads", "16", "--kv-heads", "8", "--vocab", "32768", "--shards"],
                       check=True, stdout=subprocess.DEVNULL)
        # The demo model's tokenizer: synth writes weights and config only.
        shutil.copy(os.path.join(ROOT, "models/demo/tokenizer.json"), model)
    return model, sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))


def timed(args, env=None):
    start = time.perf_counter()
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, env=env, text=True).stdout
    return time.perf_counter() - start, out


def download(build, endpoint, cache, connections):
    env = dict(os.environ, HF_ENDPOINT=endpoint)
    seconds, out = timed([os.path.join(build, "tools/df11"), "download", "bench/model",
                          "--cache-dir", cache, "--connections", str(connections), "--quiet"], env)
    return seconds, out.strip().splitlines()[-1]


def load(build, work, name, endpoint, cache, connections):
    daemon, address = start_daemon(build, work, name, endpoint, cache, connections)
    try:
        seconds, _ = timed([os.path.join(build, "client/df11ctl"), "--addr", address, "load",
                            "bench/model", "--json"])
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    return seconds


def main():
    a, work = parse_args(__doc__, "bench-hub-")
    procs = []
    try:
        model, model_bytes = make_model(a.build, work, a.layers)
        hub, endpoint = start_fake_hub(a.build, work, model, 0)
        procs.append(hub)

        cache = os.path.join(work, "cache-fast")
        shutil.rmtree(cache, ignore_errors=True)
        download_s, snapshot = download(a.build, endpoint, cache, 8)
        files = [os.path.join(snapshot, f) for f in sorted(os.listdir(snapshot))]
        timed(["sh", "-c", 'cat "$@" > /dev/null', "cat"] + files)  # warm the page cache
        cat_s, _ = timed(["sh", "-c", 'cat "$@" > /dev/null', "cat"] + files)
        cached_load_s = load(a.build, work, "daemon-cached", endpoint, cache, 8)

        slow, slow_endpoint = start_fake_hub(a.build, work, model, a.throttle)
        procs.append(slow)
        slow_cache = os.path.join(work, "cache-slow-download")
        shutil.rmtree(slow_cache, ignore_errors=True)
        throttled_download_s, _ = download(a.build, slow_endpoint, slow_cache, 1)
        load_cache = os.path.join(work, "cache-slow-load")
        shutil.rmtree(load_cache, ignore_errors=True)
        throttled_load_s = load(a.build, work, "daemon-streaming", slow_endpoint, load_cache, 1)

        gb = model_bytes / 1e9
        print(json.dumps({
            "model_bytes": model_bytes,
            "files": len(files),
            "download_seconds": round(download_s, 3),
            "download_gbps": round(gb / download_s, 3),
            "cat_seconds": round(cat_s, 3),
            "cat_gbps": round(gb / cat_s, 3),
            "cached_load_seconds": round(cached_load_s, 3),
            "cached_load_gbps": round(gb / cached_load_s, 3),
            "cached_load_vs_cat": round(cat_s / cached_load_s, 3),
            "throttle_bytes_per_second": a.throttle,
            "throttled_download_seconds": round(throttled_download_s, 3),
            "throttled_load_seconds": round(throttled_load_s, 3),
            "overlap_ratio": round(throttled_load_s / throttled_download_s, 3),
        }, indent=2))
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
