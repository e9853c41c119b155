#!/usr/bin/env python3
"""df11d's OpenAI-compatible HTTP API driven by the official `openai` SDK.

The SDK is pinned in tools/requirements-test.txt and lives in the test venv. Each test class
starts its own df11d on 127.0.0.1 (free ports, read from --port-file). The tests cover:
  - listing models;
  - chat and text completions, streaming or not, with usage;
  - stop strings;
  - seeds that give `df11 generate`'s text;
  - logprobs;
  - errors with OpenAI's shape and codes;
  - a client that leaves mid-stream, which frees its slot;
  - catalog models loaded on demand: one load for concurrent first requests, eviction within a
    budget for two, and the catalog file re-read;
  - vLLM's router gauges, parsed the way the endpoint picker parses them.

  DF11D_BINARY=build/daemon/df11d DF11_TOOL=build/tools/df11 \\
      build/venv-hub/bin/python3 tests/daemon/openai_sdk_test.py -v
"""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

import openai

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.environ.get("DF11_DEMO_DIR") or os.path.join(REPO, "models", "demo")
START_TIMEOUT = 60  # seconds


def http_get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def metric(text, name, **labels):
    """The value of sample `name` whose labels include `labels`, or None."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return None


def info_labels(text, name):
    """The labels of info gauge `name` (one sample), as the endpoint picker reads them."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line[len(name):]))
    return None


class Daemon:
    """A df11d on loopback ports, with its config and log in a temporary directory."""

    def __init__(self, config):
        self.dir = tempfile.mkdtemp(prefix="df11d-openai-")
        self.config_path = os.path.join(self.dir, "config.yaml")
        with open(self.config_path, "w") as f:
            f.write(config)
        ports = os.path.join(self.dir, "ports.json")
        self.log = open(os.path.join(self.dir, "df11d.log"), "w")
        self.proc = subprocess.Popen(
            [os.environ["DF11D_BINARY"], "--config", self.config_path, "--listen",
             "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--port-file", ports],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + START_TIMEOUT
        while not os.path.exists(ports):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("df11d did not start: " + self.read_log())
            time.sleep(0.02)
        with open(ports) as f:
            bound = json.load(f)
        self.http, self.grpc = bound["http"], bound["grpc"]
        self.url = f"http://127.0.0.1:{self.http}/v1"
        self.client = openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0)

    def read_log(self):
        with open(os.path.join(self.dir, "df11d.log")) as f:
            return f.read()

    def wait_ready(self, name):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            models = {m.id: m for m in self.client.models.list().data}
            if name in models and models[name].model_extra.get("status") == "ready":
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not become ready: " + self.read_log())

    def metrics(self):
        return http_get(self.http, "/metrics")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir)
        return code


class OpenAiApiTest(unittest.TestCase):
    """One daemon with the demo model preloaded and a catalog entry that is not loaded."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(f"""devices: [cpu]
cpu_threads: 2
preload: [{{source: {DEMO}, name: demo, pin: true}}]
catalog: [{{source: {DEMO}, name: demo-spare}}]
limits:
  max_prompt_tokens: 64
  max_tokens: 2000
  max_request_bytes: 64KiB
""")
        cls.daemon.wait_ready("demo")
        cls.client = cls.daemon.client

    @classmethod
    def tearDownClass(cls):
        assert cls.daemon.stop() == 0

    def test_lists_resident_and_catalog_models(self):
        models = {m.id: m for m in self.client.models.list().data}
        self.assertEqual(models["demo"].object, "model")
        self.assertEqual(models["demo"].owned_by, "df11d")
        self.assertEqual(models["demo"].model_extra["status"], "ready")
        self.assertGreater(models["demo"].model_extra["bytes"], 0)
        self.assertEqual(models["demo-spare"].model_extra["status"], "available")
        # One model by id, as the SDK asks for it (GET /v1/models/{id}).
        demo = self.client.models.retrieve("demo")
        self.assertEqual(demo.id, "demo")
        self.assertEqual(demo.model_extra["bytes"], models["demo"].model_extra["bytes"])
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("no-such-model")

    def test_chat_completion(self):
        r = self.client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "Write a loop."}],
            max_completion_tokens=12, temperature=0)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, "demo")
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertTrue(r.choices[0].message.content)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 12)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 12)

    def test_streaming_gives_the_text_of_the_whole_response_and_usage(self):
        for chat in (False, True):
            with self.subTest(chat=chat):
                if chat:
                    args = dict(model="demo", messages=[{"role": "user", "content": "def "}],
                                max_tokens=16, temperature=0)
                    whole = self.client.chat.completions.create(**args)
                    want = whole.choices[0].message.content
                    stream = self.client.chat.completions.create(
                        **args, stream=True, stream_options={"include_usage": True})
                    chunks = list(stream)
                    got = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                    self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
                else:
                    args = dict(model="demo", prompt="import os\n", max_tokens=16, temperature=0)
                    whole = self.client.completions.create(**args)
                    want = whole.choices[0].text
                    stream = self.client.completions.create(
                        **args, stream=True, stream_options={"include_usage": True})
                    chunks = list(stream)
                    got = "".join(c.choices[0].text for c in chunks if c.choices)
                self.assertEqual(got, want)
                finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
                self.assertEqual(finishes[-1], "length")
                self.assertEqual(chunks[-1].choices, [])
                self.assertEqual(chunks[-1].usage.completion_tokens, 16)
                self.assertEqual(chunks[-1].usage.prompt_tokens, whole.usage.prompt_tokens)

    def test_stop_string_ends_the_text_before_it(self):
        args = dict(model="demo", prompt="def main():\n", max_tokens=64, temperature=0)
        free = self.client.completions.create(**args).choices[0].text
        self.assertIn("\n", free)
        stop = free[free.index("\n"):free.index("\n") + 1]
        r = self.client.completions.create(**args, stop=[stop])
        self.assertEqual(r.choices[0].text, free[:free.index(stop)])
        self.assertEqual(r.choices[0].finish_reason, "stop")

    def test_a_seed_gives_the_text_of_df11_generate(self):
        out = subprocess.run(
            [os.environ["DF11_TOOL"], "generate", DEMO, "--prompt", "class ", "--max-tokens",
             "24", "--temperature", "0.9", "--seed", "7", "--json"],
            check=True, capture_output=True, text=True, timeout=120).stdout
        want = json.loads(out)["text"]
        for _ in range(2):
            r = self.client.completions.create(model="demo", prompt="class ", max_tokens=24,
                                               temperature=0.9, seed=7)
            self.assertEqual(r.choices[0].text, want)

    def test_logprobs(self):
        r = self.client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
            temperature=0, logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), 5)
        for t in content:
            self.assertLessEqual(t.logprob, 0)
            self.assertEqual(len(t.top_logprobs), 3)
            # Greedy: the chosen token is the most likely one.
            self.assertEqual(t.top_logprobs[0].logprob, t.logprob)
            self.assertEqual(bytes(t.bytes).decode("utf-8", "replace"), t.token)
        c = self.client.completions.create(model="demo", prompt="x = ", max_tokens=4,
                                           temperature=0, logprobs=2)
        lp = c.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 4)
        self.assertEqual(len(lp.top_logprobs[0]), 2)
        self.assertEqual(lp.text_offset[0], 0)

    def test_errors_have_openai_shapes_and_codes(self):
        with self.assertRaises(openai.NotFoundError) as e:
            self.client.completions.create(model="no-such-model", prompt="x")
        self.assertEqual(e.exception.status_code, 404)
        self.assertEqual(e.exception.body["code"], "model_not_found")
        self.assertIn("no-such-model", e.exception.body["message"])
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="demo", prompt="x", n=2)
        self.assertEqual(e.exception.body["param"], "n")
        self.assertEqual(e.exception.body["type"], "invalid_request_error")
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="demo", prompt="x", temperature=-1)
        self.assertIn("temperature", e.exception.body["message"])
        # A prompt longer than limits.max_prompt_tokens, and a body over limits.max_request_bytes.
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="demo", prompt="x " * 200)
        self.assertIn("max_prompt_tokens", e.exception.body["message"])
        with self.assertRaises(openai.APIStatusError) as e:
            self.client.completions.create(model="demo", prompt="x" * (80 << 10))
        self.assertEqual(e.exception.status_code, 413)
        self.assertIn("max_request_bytes", e.exception.body["message"])

    def test_a_client_that_leaves_mid_stream_frees_its_slot(self):
        cancelled = metric(self.daemon.metrics(), "df11_requests_total", model="demo",
                           outcome="cancelled") or 0
        stream = self.client.completions.create(
            model="demo", prompt="def ", max_tokens=2000, stream=True,
            extra_body={"ignore_eos": True})
        for i, _ in enumerate(stream):
            if i == 3:
                break
        stream.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            text = self.daemon.metrics()
            if (metric(text, "df11_requests_running", model="demo") == 0 and
                    metric(text, "df11_requests_total", model="demo",
                           outcome="cancelled") == cancelled + 1):
                break
            time.sleep(0.05)
        else:
            self.fail("the request still runs after its client left:\n" + text)


class OnDemandTest(unittest.TestCase):
    """Catalog models, none loaded at start, in a budget that holds two of them."""

    @classmethod
    def setUpClass(cls):
        cls.catalog_file = tempfile.NamedTemporaryFile(
            "w", suffix=".yaml", delete=False, prefix="df11d-catalog-")
        cls.catalog_file.write("catalog: []\n")
        cls.catalog_file.close()
        entries = ", ".join(f"{{source: {DEMO}, name: {n}, keep_alive: 0s}}"
                            for n in ("a", "b", "c"))
        cls.daemon = Daemon(f"""devices: [cpu]
cpu_threads: 2
memory: {{budget: 18MiB, eviction: lru}}
preload: []
catalog: [{entries}]
catalog_file: {cls.catalog_file.name}
""")
        cls.client = cls.daemon.client

    @classmethod
    def tearDownClass(cls):
        assert cls.daemon.stop() == 0
        os.unlink(cls.catalog_file.name)

    def complete(self, model):
        return self.client.completions.create(model=model, prompt="def ", max_tokens=4,
                                              temperature=0).choices[0].text

    def status(self, name):
        models = {m.id: m.model_extra["status"] for m in self.client.models.list().data}
        return models.get(name)

    def test_1_a_first_request_loads_its_model(self):
        self.assertEqual(self.status("a"), "available")
        self.assertTrue(self.complete("a"))
        self.assertEqual(self.status("a"), "ready")

    def test_2_concurrent_first_requests_share_one_load(self):
        loads = metric(self.daemon.metrics(), "df11_model_loads_total", outcome="ok") or 0
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(lambda _: self.complete("b"), range(8)))
        self.assertEqual(len(set(texts)), 1)
        self.assertEqual(metric(self.daemon.metrics(), "df11_model_loads_total", outcome="ok"),
                         loads + 1)

    def test_3_three_models_alternate_in_a_budget_for_two(self):
        evictions = sum(metric(self.daemon.metrics(), "df11_model_evictions_total", model=m) or 0
                        for m in "abc")
        for model in "abcabc":
            self.assertTrue(self.complete(model))
        text = self.daemon.metrics()
        self.assertGreater(
            sum(metric(text, "df11_model_evictions_total", model=m) or 0 for m in "abc"),
            evictions)
        # The router's view: resident models are the running adapters, within max_lora.
        lora = info_labels(text, "vllm:lora_requests_info")
        running = [m for m in lora["running_lora_adapters"].split(",") if m]
        self.assertLessEqual(len(running), 2)
        self.assertIn("c", running)
        self.assertGreaterEqual(int(lora["max_lora"]), len(running))
        self.assertEqual(lora["waiting_lora_adapters"], "")

    def test_4_the_catalog_file_is_read_again_when_it_changes(self):
        self.assertIsNone(self.status("d"))
        with open(self.catalog_file.name, "w") as f:
            f.write(f"catalog:\n  - {{source: {DEMO}, name: d, keep_alive: 0s}}\n"
                    f"  - {{source: {DEMO}, name: spare}}\n")
        deadline = time.time() + 15
        while self.status("d") is None and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.status("d"), "available")
        self.assertTrue(self.complete("d"))

    def test_5_a_model_outside_the_catalog_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as e:
            self.complete("e")
        self.assertIn("neither loaded nor in the catalog", e.exception.body["message"])

    def test_6_grpc_lists_catalog_entries_as_available(self):
        listed = subprocess.run(
            [os.environ["DF11CTL_BINARY"], "--addr", f"127.0.0.1:{self.daemon.grpc}", "list",
             "--json"], check=True, capture_output=True, text=True, timeout=60).stdout
        states = {m["name"]: m["state"] for m in json.loads(listed).get("models", [])}
        self.assertEqual(states.get("spare"), "MODEL_STATE_AVAILABLE")
        self.assertEqual(states.get("d"), "MODEL_STATE_READY")


class OnDemandOffTest(unittest.TestCase):
    """on_demand: false: catalog entries are listed but a request must find its model loaded."""

    def test_a_catalog_model_that_is_not_loaded_is_not_found(self):
        daemon = Daemon(f"""devices: [cpu]
cpu_threads: 2
preload: []
catalog: [{{source: {DEMO}, name: a}}]
on_demand: false
""")
        try:
            with self.assertRaises(openai.NotFoundError) as e:
                daemon.client.completions.create(model="a", prompt="x", max_tokens=2)
            self.assertIn("is not loaded", e.exception.body["message"])
            self.assertEqual(
                metric(daemon.metrics(), "df11_model_loads_total", outcome="ok") or 0, 0)
        finally:
            self.assertEqual(daemon.stop(), 0)


if __name__ == "__main__":
    unittest.main()
