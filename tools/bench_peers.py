#!/usr/bin/env python3
"""Peer shard distribution benchmark on loopback, printed as one JSON object.

Makes a ~1 GB BF16 model (df11 synth, one shard per layer), serves it from the fake hub
(tests/hub/fake_hub) and puts it in node A's hub cache (df11 download). Then measures, in one
run, the time to READY of `df11ctl load` on a fresh node with an empty cache:
  peer_load_seconds / _gbps       node B, peers: [A]: every file from A, the link unthrottled;
                                  A reads its blobs from disk and hashes them (a first serve)
  peer_load_again_seconds / _gbps the same on another fresh node: A's blobs verified already
                                  (served without hashing) and in its page cache
  hub_load_seconds / _gbps        node C, no peers: every file from the fake hub, unthrottled
  throttled_peer_load_seconds     node B again, reaching A through a relay paced at --throttle
  throttled_hub_load_seconds      node C again, the fake hub paced at --throttle
  throttled_peer_vs_hub           the two above divided (about 1: the peer path is limited by
                                  the link, like the hub's)
  peer_bytes / hub_bytes          df11_download_bytes_total{source} of the peer runs (hub 0)
The throttled hub runs one connection (hub.max_connections: 1), the relay paces all connections
together, so both deliver --throttle bytes/s in total.

Usage: tools/bench_peers.py [--build build] [--layers 8] [--throttle 200000000] [--keep DIR]
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_hub import (download, make_model, parse_args, start_fake_hub,  # noqa: E402
                       timed, wait_for_file)


class PacedRelay:
    """A TCP relay to 127.0.0.1:target that sends at most `rate` bytes/s towards its clients,
    all connections together."""

    def __init__(self, target, rate):
        self.target, self.rate = target, rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.next_send = time.perf_counter()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, True), daemon=True).start()

    def pump(self, src, dst, paced):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if paced:
                    with self.lock:  # a shared schedule: the rate holds across connections
                        at = max(self.next_send, time.perf_counter())
                        self.next_send = at + len(data) / self.rate
                    delay = at - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.listener.close()


def start_node(build, work, name, endpoint, peers, connections=8):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    peers_yaml = f"peers: {{addresses: [{', '.join(peers)}]}}\n" if peers else ""
    with open(os.path.join(d, "config.yaml"), "w") as f:
        f.write(f"""listen: {{grpc: "127.0.0.1:0", http: "127.0.0.1:0"}}
preload: []
hub: {{endpoint: "{endpoint}", cache_dir: "{d}/cache", max_connections: {connections}}}
{peers_yaml}""")
    proc = subprocess.Popen([os.path.join(build, "daemon/df11d"), "--config",
                             os.path.join(d, "config.yaml"), "--port-file",
                             os.path.join(d, "ports.json")],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
    wait_for_file(os.path.join(d, "ports.json"), proc)
    with open(os.path.join(d, "ports.json")) as f:
        ports = json.load(f)
    return proc, f"127.0.0.1:{ports['grpc']}", ports["http"]


def downloaded_bytes(http_port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics").read().decode()
    out = {"hub": 0, "peer": 0}
    for source, value in re.findall(r'df11_download_bytes_total\{source="(\w+)"\} (\S+)', text):
        out[source] = int(float(value))
    return out


def load_on_fresh_node(build, work, name, endpoint, peers, connections=8):
    """Seconds to READY of df11ctl load on a new node with an empty cache, and its byte counts."""
    node, address, http_port = start_node(build, work, name, endpoint, peers, connections)
    try:
        seconds, _ = timed([os.path.join(build, "client/df11ctl"), "--addr", address, "load",
                            "bench/model", "--json"])
        return seconds, downloaded_bytes(http_port)
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=60)


def main():
    a, work = parse_args(__doc__, "bench-peers-")
    procs = []
    relay = None
    try:
        model, model_bytes = make_model(a.build, work, a.layers)
        hub, endpoint = start_fake_hub(a.build, work, model, 0)
        procs.append(hub)
        slow_hub, slow_endpoint = start_fake_hub(a.build, work, model, a.throttle)
        procs.append(slow_hub)

        # Node A: the model in its cache, served to peers.
        node_a, address_a, _ = start_node(a.build, work, "node-a", endpoint, [])
        procs.append(node_a)
        download(a.build, endpoint, os.path.join(work, "node-a", "cache"), 8)

        # B can reach the hub too: every byte must still come from A (hub_bytes 0).
        peer_s, peer_bytes = load_on_fresh_node(a.build, work, "node-b", endpoint, [address_a])
        again_s, _ = load_on_fresh_node(a.build, work, "node-b-again", endpoint, [address_a])
        hub_s, _ = load_on_fresh_node(a.build, work, "node-c", endpoint, [])
        relay = PacedRelay(int(address_a.rsplit(":", 1)[1]), a.throttle)
        throttled_peer_s, _ = load_on_fresh_node(a.build, work, "node-b-paced", slow_endpoint,
                                                 [f"127.0.0.1:{relay.port}"])
        throttled_hub_s, _ = load_on_fresh_node(a.build, work, "node-c-paced", slow_endpoint, [],
                                                connections=1)
        gb = model_bytes / 1e9
        print(json.dumps({
            "model_bytes": model_bytes,
            "peer_load_seconds": round(peer_s, 3),
            "peer_load_gbps": round(gb / peer_s, 3),
            "peer_load_again_seconds": round(again_s, 3),
            "peer_load_again_gbps": round(gb / again_s, 3),
            "hub_load_seconds": round(hub_s, 3),
            "hub_load_gbps": round(gb / hub_s, 3),
            "throttle_bytes_per_second": a.throttle,
            "throttled_peer_load_seconds": round(throttled_peer_s, 3),
            "throttled_hub_load_seconds": round(throttled_hub_s, 3),
            "throttled_peer_vs_hub": round(throttled_peer_s / throttled_hub_s, 3),
            "peer_bytes": peer_bytes["peer"],
            "hub_bytes": peer_bytes["hub"],
        }, indent=2))
    finally:
        if relay:
            relay.close()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
