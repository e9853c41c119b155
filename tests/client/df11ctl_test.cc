// df11ctl against a fake daemon on 127.0.0.1: every command's exact output (text and --json), the
// requests it sends, exit codes and error lines. Most tests call RunDf11ctl() with captured
// streams; the last ones run the built binary (this build's, or $DF11CTL) to check main() and
// DF11_ADDR.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/ctl/ctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_model_host.h"

namespace df11::ctl {
namespace {

using ::df11::testing::FakeModelHost;
using ::df11::testing::FakeServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

struct Output {
  int code;
  std::string out;
  std::string err;
};

v1::DeviceBytes* AddBytes(v1::ModelInfo& m, const std::string& device, uint64_t units,
                          uint64_t passthrough, uint64_t kv) {
  v1::DeviceBytes* b = m.add_bytes();
  b->set_device(device);
  b->set_df11_units(units);
  b->set_passthrough(passthrough);
  b->set_kv_cache_in_use(kv);
  b->set_total(units + passthrough + kv);
  return b;
}

v1::ModelInfo DemoModel() {
  v1::ModelInfo m;
  m.set_name("demo");
  m.set_state(v1::MODEL_STATE_READY);
  m.set_source("models/demo");
  m.set_architecture("Qwen3ForCausalLM");
  m.set_df11(true);
  AddBytes(m, "cpu", 4 * kMiB, kMiB, 512 * kKiB);
  m.set_pinned(true);
  m.set_keep_alive_seconds(300);
  m.set_last_used_unix_ms(1700000000000);
  m.set_requests_served(12);
  m.set_tokens_generated(3456);
  m.set_context_length(4096);
  m.set_running_requests(1);
  m.set_queued_requests(2);
  return m;
}

v1::ModelInfo BigModel() {
  v1::ModelInfo m;
  m.set_name("big");
  m.set_state(v1::MODEL_STATE_LOADING);
  m.set_source("org/big@main");
  m.set_resolved_revision("abc123");
  m.set_architecture("LlamaForCausalLM");
  AddBytes(m, "cuda:0", 0, 2 * kGiB, 0);
  AddBytes(m, "cuda:1", 0, kGiB, 0);
  return m;
}

v1::NodeStatus Node() {
  v1::NodeStatus s;
  v1::DeviceStatus* d = s.add_devices();
  d->set_device("cpu");
  d->set_total(16 * kGiB);
  d->set_budget(8 * kGiB);
  d->set_weights(4 * kGiB);
  d->set_scratch(kGiB);
  d->set_kv_cache(512 * kMiB);
  d->set_workspace(512 * kMiB);
  d->set_used(6 * kGiB);
  d->set_free(2 * kGiB);
  d->set_placeable(3 * kGiB);
  *s.add_models() = DemoModel();
  s.set_queued_requests(2);
  s.set_running_requests(1);
  s.set_version("0.1.0");
  return s;
}

v1::GenerateResponse Delta(const std::string& text, std::vector<int32_t> ids,
                           std::vector<float> logprobs) {
  v1::GenerateResponse r;
  r.set_text(text);
  for (int32_t id : ids) r.add_token_ids(id);
  for (float l : logprobs) r.add_logprobs(l);
  return r;
}

// "Hel" + "lo", three tokens, stopped by max_tokens.
std::vector<v1::GenerateResponse> HelloStream() {
  std::vector<v1::GenerateResponse> stream = {Delta("Hel", {1, 2}, {-0.1f, -2.5f}),
                                              Delta("lo", {3}, {0.0f}), Delta("", {}, {})};
  v1::GenerateResponse& last = stream.back();
  last.set_finish_reason(v1::FINISH_REASON_LENGTH);
  last.mutable_usage()->set_prompt_tokens(4);
  last.mutable_usage()->set_completion_tokens(3);
  last.mutable_timings()->set_queue_seconds(0.5);
  last.mutable_timings()->set_time_to_first_token_seconds(0.25);
  last.mutable_timings()->set_seconds_per_token(0.125);
  last.mutable_timings()->set_total_seconds(1.0);
  return stream;
}

class Df11ctlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  // df11ctl --addr <fake> ARGS...
  Output Run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"--addr", server_.address()};
    all.insert(all.end(), args.begin(), args.end());
    return RunWithEnv(all, nullptr);
  }
  Output RunWithEnv(const std::vector<std::string>& args, const char* env_address) {
    std::ostringstream out, err;
    Console console{out, err};
    const int code = RunDf11ctl(args, env_address, console);
    return {code, out.str(), err.str()};
  }
  FakeModelHost& host() { return server_.host(); }

  FakeServer server_;
};

TEST_F(Df11ctlTest, ListPrintsOneRowPerModel) {
  host().Set([](FakeModelHost::Replies& r) {
    *r.list.add_models() = DemoModel();
    *r.list.add_models() = BigModel();
  });
  const Output o = Run({"list"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(
      o.out,
      "NAME  STATE    ARCH              FORMAT  DEVICE           UNITS  PASSTHROUGH   KV CACHE"
      "    TOTAL  PINNED  REQUESTS  TOKENS\n"
      "demo  ready    Qwen3ForCausalLM  DF11    cpu            4.0 MiB      1.0 MiB  512.0 KiB"
      "  5.5 MiB  yes           12    3456\n"
      "big   loading  LlamaForCausalLM  BF16    cuda:0,cuda:1      0 B      3.0 GiB        0 B"
      "  3.0 GiB  no             0       0\n");
}

TEST_F(Df11ctlTest, ListShowsOwnersOnceATenantOwnsAModel) {
  host().Set([](FakeModelHost::Replies& r) {
    v1::ModelInfo* demo = r.list.add_models();
    *demo = DemoModel();
    demo->set_owner("shared");
    v1::ModelInfo* chat = r.list.add_models();
    *chat = DemoModel();
    chat->set_name("chat");
    chat->set_owner("team-a");
  });
  const Output o = Run({"list"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out,
            "NAME  OWNER   STATE  ARCH              FORMAT  DEVICE    UNITS  PASSTHROUGH   KV CACHE"
            "    TOTAL  PINNED  REQUESTS  TOKENS\n"
            "demo  shared  ready  Qwen3ForCausalLM  DF11    cpu     4.0 MiB      1.0 MiB  512.0 KiB"
            "  5.5 MiB  yes           12    3456\n"
            "chat  team-a  ready  Qwen3ForCausalLM  DF11    cpu     4.0 MiB      1.0 MiB  512.0 KiB"
            "  5.5 MiB  yes           12    3456\n");
}

TEST_F(Df11ctlTest, ListWithoutModelsSaysSo) {
  const Output o = Run({"list"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, "no models loaded\n");
}

TEST_F(Df11ctlTest, ListJsonIsTheProtoMessageWithEveryField) {
  host().Set([](FakeModelHost::Replies& r) {
    v1::ModelInfo* m = r.list.add_models();
    m->set_name("tiny");
    m->set_state(v1::MODEL_STATE_READY);
    AddBytes(*m, "cpu", 3, 2, 1);
    m->set_requests_served(5);
  });
  const Output o = Run({"list", "--json"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, R"({"models":[{"name":"tiny","state":"MODEL_STATE_READY","failure_reason":"",)"
                   R"("source":"","resolved_revision":"","architecture":"","df11":false,)"
                   R"("bytes":[{"device":"cpu","df11_units":"3","passthrough":"2",)"
                   R"("kv_cache_in_use":"1","total":"6"}],"pinned":false,"keep_alive_seconds":0,)"
                   R"("last_used_unix_ms":"0","requests_served":"5","tokens_generated":"0",)"
                   R"("context_length":"0","running_requests":0,"queued_requests":0,)"
                   R"("owner":""}]})"
                   "\n");
}

TEST_F(Df11ctlTest, GetPrintsEveryField) {
  host().Set([](FakeModelHost::Replies& r) { r.models = {DemoModel(), BigModel()}; });
  const Output o = Run({"get", "demo"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out,
            "name:              demo\n"
            "state:             ready\n"
            "source:            models/demo\n"
            "architecture:      Qwen3ForCausalLM\n"
            "format:            DF11\n"
            "context length:    4096\n"
            "pinned:            yes\n"
            "keep alive:        5m\n"
            "last used:         2023-11-14 22:13:20 UTC\n"
            "requests served:   12\n"
            "tokens generated:  3456\n"
            "running:           1\n"
            "queued:            2\n"
            "memory on cpu:     5.5 MiB (df11 units 4.0 MiB, passthrough 1.0 MiB, kv cache "
            "512.0 KiB)\n");
  EXPECT_EQ(host().requests().get.name(), "demo");

  const Output big = Run({"get", "big"});
  EXPECT_EQ(big.code, kExitOk);
  EXPECT_EQ(big.out,
            "name:              big\n"
            "state:             loading\n"
            "source:            org/big@main\n"
            "revision:          abc123\n"
            "architecture:      LlamaForCausalLM\n"
            "format:            BF16\n"
            "context length:    0\n"
            "pinned:            no\n"
            "keep alive:        0s\n"
            "last used:         never\n"
            "requests served:   0\n"
            "tokens generated:  0\n"
            "running:           0\n"
            "queued:            0\n"
            "memory on cuda:0:  2.0 GiB (df11 units 0 B, passthrough 2.0 GiB, kv cache 0 B)\n"
            "memory on cuda:1:  1.0 GiB (df11 units 0 B, passthrough 1.0 GiB, kv cache 0 B)\n");
}

TEST_F(Df11ctlTest, FailedModelShowsItsReason) {
  host().Set([](FakeModelHost::Replies& r) {
    v1::ModelInfo m;
    m.set_name("broken");
    m.set_state(v1::MODEL_STATE_FAILED);
    m.set_failure_reason("shard 2: checksum mismatch");
    r.models = {m};
  });
  const Output o = Run({"get", "broken"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_THAT(o.out, StartsWith("name:              broken\n"
                                "state:             failed\n"
                                "failure:           shard 2: checksum mismatch\n"
                                "source:            \n"));
}

TEST_F(Df11ctlTest, FailedCallPrintsCodeAndMessageAndExitsOne) {
  const Output o = Run({"get", "nope"});
  EXPECT_EQ(o.code, kExitFailed);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "df11ctl get: NOT_FOUND: unknown model nope\n");

  host().Set([](FakeModelHost::Replies& r) {
    r.error = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "needs 9.0 GiB, 2.0 GiB free, 1.0 GiB evictable");
  });
  const Output load = Run({"load", "org/huge"});
  EXPECT_EQ(load.code, kExitFailed);
  EXPECT_EQ(load.err,
            "df11ctl load: RESOURCE_EXHAUSTED: needs 9.0 GiB, 2.0 GiB free, 1.0 GiB evictable\n");
  EXPECT_EQ(Run({"status", "--json"}).err,
            "df11ctl status: RESOURCE_EXHAUSTED: needs 9.0 GiB, 2.0 GiB free, 1.0 GiB "
            "evictable\n");
}

TEST_F(Df11ctlTest, EstimateTextAndJson) {
  host().Set([](FakeModelHost::Replies& r) {
    r.estimate.set_architecture("Qwen3ForCausalLM");
    r.estimate.set_df11(true);
    r.estimate.set_df11_units(5 * kGiB);
    r.estimate.set_passthrough(kGiB + 512 * kMiB);
    r.estimate.set_total(6 * kGiB + 512 * kMiB);
    r.estimate.set_kv_bytes_per_token(144 * kKiB);
    r.estimate.set_context_length(32768);
  });
  const Output o = Run({"estimate", "org/Qwen3-8B-DF11"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out,
            "source:                    org/Qwen3-8B-DF11\n"
            "architecture:              Qwen3ForCausalLM\n"
            "format:                    DF11\n"
            "df11 units:                5.0 GiB\n"
            "passthrough:               1.5 GiB\n"
            "weights:                   6.5 GiB\n"
            "kv cache per token:        144.0 KiB\n"
            "context length:            32768\n"
            "kv cache at full context:  4.5 GiB\n");
  EXPECT_EQ(host().requests().estimate.source(), "org/Qwen3-8B-DF11");

  const Output json = Run({"estimate", "--json", "org/Qwen3-8B-DF11"});
  EXPECT_EQ(json.code, kExitOk);
  EXPECT_EQ(json.out,
            R"({"architecture":"Qwen3ForCausalLM","df11":true,"df11_units":"5368709120",)"
            R"("passthrough":"1610612736","total":"6979321856","kv_bytes_per_token":"147456",)"
            R"("context_length":"32768"})"
            "\n");
}

TEST_F(Df11ctlTest, LoadShowsEachPhaseThenTheModel) {
  host().Set([](FakeModelHost::Replies& r) {
    auto add = [&](v1::LoadPhase phase, uint64_t done, uint64_t total) {
      v1::LoadModelProgress& p = r.load.emplace_back();
      p.set_phase(phase);
      p.set_bytes_done(done);
      p.set_bytes_total(total);
    };
    add(v1::LOAD_PHASE_RESOLVING, 0, 0);
    add(v1::LOAD_PHASE_DOWNLOADING, 0, 2 * kGiB);
    add(v1::LOAD_PHASE_DOWNLOADING, kGiB, 2 * kGiB);
    add(v1::LOAD_PHASE_DOWNLOADING, kGiB + 1, 2 * kGiB);  // same tenth: no new line
    add(v1::LOAD_PHASE_DOWNLOADING, 2 * kGiB, 2 * kGiB);
    add(v1::LOAD_PHASE_PLACING, 0, 5 * kMiB);
    add(v1::LOAD_PHASE_PLACING, 5 * kMiB, 5 * kMiB);
    v1::LoadModelProgress& done = r.load.emplace_back();
    done.set_phase(v1::LOAD_PHASE_DONE);
    *done.mutable_model() = DemoModel();
  });
  const Output o = Run(
      {"load", "org/demo", "--name", "demo", "--pin", "--keep-alive", "5m", "--device", "cuda:1"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.err,
            "resolving: 100% 0 B / 0 B demo\n"
            "downloading:   0% 0 B / 2.0 GiB demo\n"
            "downloading:  50% 1.0 GiB / 2.0 GiB demo\n"
            "downloading: 100% 2.0 GiB / 2.0 GiB demo\n"
            "placing:   0% 0 B / 5.0 MiB demo\n"
            "placing: 100% 5.0 MiB / 5.0 MiB demo\n");
  EXPECT_EQ(o.out, "demo: ready, Qwen3ForCausalLM DF11, 5.5 MiB on cpu\n");
  const v1::LoadModelRequest request = host().requests().load;
  EXPECT_EQ(request.source(), "org/demo");
  EXPECT_EQ(request.name(), "demo");
  EXPECT_TRUE(request.pin());
  EXPECT_EQ(request.keep_alive_seconds(), 300);
  EXPECT_EQ(request.device(), "cuda:1");
}

TEST_F(Df11ctlTest, LoadJsonPrintsTheLastProgressMessage) {
  host().Set([](FakeModelHost::Replies& r) {
    v1::LoadModelProgress& done = r.load.emplace_back();
    done.set_phase(v1::LOAD_PHASE_DONE);
    done.mutable_model()->set_name("m");
    done.mutable_model()->set_state(v1::MODEL_STATE_READY);
  });
  const Output o = Run({"load", "--json", "models/m"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_THAT(o.out, StartsWith(R"({"phase":"LOAD_PHASE_DONE","bytes_done":"0",)"
                                R"("bytes_total":"0","model":{"name":"m","state":)"
                                R"("MODEL_STATE_READY",)"));
  EXPECT_EQ(o.out.back(), '\n');
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1);  // one line
  EXPECT_EQ(host().requests().load.name(), "");
  EXPECT_FALSE(host().requests().load.pin());
}

TEST_F(Df11ctlTest, LoadEndingFailedExitsOne) {
  host().Set([](FakeModelHost::Replies& r) {
    v1::LoadModelProgress& done = r.load.emplace_back();
    done.set_phase(v1::LOAD_PHASE_DONE);
    done.mutable_model()->set_name("m");
    done.mutable_model()->set_state(v1::MODEL_STATE_FAILED);
    done.mutable_model()->set_failure_reason("model.safetensors: truncated");
  });
  const Output o = Run({"load", "models/m"});
  EXPECT_EQ(o.code, kExitFailed);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "df11ctl load: UNKNOWN: m: the load failed: model.safetensors: truncated\n");
}

TEST_F(Df11ctlTest, UnloadSendsDrainAndCancel) {
  host().Set([](FakeModelHost::Replies& r) {
    *r.unload.mutable_model() = DemoModel();
    r.unload.set_bytes_freed(5 * kMiB + 512 * kKiB);
    r.unload.set_requests_cancelled(1);
  });
  const Output o = Run({"unload", "demo", "--drain", "250ms", "--cancel"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, "unloaded demo: freed 5.5 MiB, 1 request cancelled\n");
  EXPECT_EQ(host().requests().unload.name(), "demo");
  EXPECT_EQ(host().requests().unload.drain_seconds(), 0.25);
  EXPECT_TRUE(host().requests().unload.cancel_in_flight());

  const Output plain = Run({"unload", "demo"});
  EXPECT_EQ(plain.out, "unloaded demo: freed 5.5 MiB, 1 request cancelled\n");
  EXPECT_EQ(host().requests().unload.drain_seconds(), 0);
  EXPECT_FALSE(host().requests().unload.cancel_in_flight());
}

TEST_F(Df11ctlTest, GenerateStreamsTextThenASummary) {
  host().Set([](FakeModelHost::Replies& r) { r.generate = HelloStream(); });
  const Output o = Run({"generate", "demo", "--prompt", "Say hello", "--max-tokens", "3",
                        "--temperature", "0", "--seed", "42", "--stop", "\n\n", "--stop", "END"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, "Hello\n");
  EXPECT_EQ(o.err,
            "df11ctl generate: 3 tokens (length); prompt 4 tokens; first token after 0.250 s; "
            "8.0 tokens/s\n");
  const v1::GenerateRequest request = host().requests().generate;
  EXPECT_EQ(request.model(), "demo");
  EXPECT_EQ(request.text(), "Say hello");
  EXPECT_EQ(request.max_tokens(), 3);
  EXPECT_TRUE(request.sampling().has_temperature());
  EXPECT_EQ(request.sampling().temperature(), 0);
  EXPECT_EQ(request.sampling().seed(), 42u);
  // Flags not given stay unset, so the model's defaults apply.
  EXPECT_FALSE(request.sampling().has_top_p());
  EXPECT_FALSE(request.sampling().has_top_k());
  EXPECT_FALSE(request.sampling().has_min_p());
  EXPECT_THAT(request.stop(), ElementsAre("\n\n", "END"));
  EXPECT_FALSE(request.logprobs());
  EXPECT_FALSE(request.ignore_eos());
}

TEST_F(Df11ctlTest, GenerateChatSendsSystemThenUserMessage) {
  host().Set([](FakeModelHost::Replies& r) { r.generate = HelloStream(); });
  const Output o = Run({"generate", "demo", "--chat", "--system", "Be brief.", "--prompt", "Hi",
                        "--no-thinking", "--top-p", "0.9", "--top-k", "20", "--min-p", "0.05"});
  EXPECT_EQ(o.code, kExitOk);
  const v1::GenerateRequest request = host().requests().generate;
  ASSERT_TRUE(request.has_chat());
  ASSERT_EQ(request.chat().messages_size(), 2);
  EXPECT_EQ(request.chat().messages(0).role(), "system");
  EXPECT_EQ(request.chat().messages(0).content(), "Be brief.");
  EXPECT_EQ(request.chat().messages(1).role(), "user");
  EXPECT_EQ(request.chat().messages(1).content(), "Hi");
  EXPECT_TRUE(request.chat().add_generation_prompt());
  EXPECT_FALSE(request.enable_thinking());
  EXPECT_FLOAT_EQ(request.sampling().top_p(), 0.9f);
  EXPECT_EQ(request.sampling().top_k(), 20);
  EXPECT_FLOAT_EQ(request.sampling().min_p(), 0.05f);
  EXPECT_FALSE(request.sampling().has_temperature());
}

TEST_F(Df11ctlTest, GenerateJsonIsOneObject) {
  host().Set([](FakeModelHost::Replies& r) { r.generate = HelloStream(); });
  const Output o = Run({"generate", "demo", "--prompt", "Say hello", "--json"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out, R"({"text":"Hello","token_ids":[1,2,3],"finish_reason":"length",)"
                   R"("usage":{"prompt_tokens":4,"completion_tokens":3},)"
                   R"("timings":{"queue_seconds":0.5,"time_to_first_token_seconds":0.25,)"
                   R"("seconds_per_token":0.125,"total_seconds":1.0}})"
                   "\n");

  const Output logprobs =
      Run({"generate", "demo", "--prompt", "Say hello", "--json", "--logprobs"});
  EXPECT_EQ(logprobs.code, kExitOk);
  EXPECT_TRUE(host().requests().generate.logprobs());
  EXPECT_EQ(logprobs.out,
            R"({"text":"Hello","token_ids":[1,2,3],"finish_reason":"length",)"
            R"("usage":{"prompt_tokens":4,"completion_tokens":3},)"
            R"("timings":{"queue_seconds":0.5,"time_to_first_token_seconds":0.25,)"
            R"("seconds_per_token":0.125,"total_seconds":1.0},"logprobs":[-0.1,-2.5,0.0]})"
            "\n");
}

TEST_F(Df11ctlTest, GenerateLogprobsAddTheMeanToTheSummary) {
  host().Set([](FakeModelHost::Replies& r) { r.generate = HelloStream(); });
  const Output o = Run({"generate", "demo", "--prompt", "x", "--logprobs"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.err,
            "df11ctl generate: 3 tokens (length); prompt 4 tokens; first token after 0.250 s; "
            "8.0 tokens/s; mean logprob -0.867\n");
}

TEST_F(Df11ctlTest, GenerateErrorMidStreamEndsTheLineThenFails) {
  host().Set([](FakeModelHost::Replies& r) {
    r.generate = {Delta("Hel", {1, 2}, {})};
    r.error = grpc::Status(grpc::StatusCode::CANCELLED, "model demo is unloading");
  });
  const Output o = Run({"generate", "demo", "--prompt", "x"});
  EXPECT_EQ(o.code, kExitFailed);
  EXPECT_EQ(o.out, "Hel\n");
  EXPECT_EQ(o.err, "df11ctl generate: CANCELLED: model demo is unloading\n");
}

TEST_F(Df11ctlTest, StatusShowsDevicesAndModels) {
  host().Set([](FakeModelHost::Replies& r) { r.node = {Node()}; });
  const Output o = Run({"status"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out,
            "df11d 0.1.0: 1 model, 1 running, 2 queued\n"
            "\n"
            "DEVICE     TOTAL   BUDGET  WEIGHTS  SCRATCH   KV CACHE  KV FREE  WORKSPACE     USED"
            "     FREE  PLACEABLE\n"
            "cpu     16.0 GiB  8.0 GiB  4.0 GiB  1.0 GiB  512.0 MiB        -  512.0 MiB  6.0 GiB"
            "  2.0 GiB    3.0 GiB\n"
            "\n"
            "NAME  STATE  DEVICE   MEMORY  PINNED  RUNNING  QUEUED  REQUESTS  TOKENS\n"
            "demo  ready  cpu     5.5 MiB  yes           1       2        12    3456\n");

  const Output json = Run({"status", "--json"});
  EXPECT_EQ(json.code, kExitOk);
  EXPECT_THAT(json.out, StartsWith(R"({"devices":[{"device":"cpu","total":"17179869184",)"
                                   R"("budget":"8589934592","weights":"4294967296",)"));
  EXPECT_THAT(json.out, HasSubstr(R"("queued_requests":2,"running_requests":1,)"
                                  R"("version":"0.1.0","time_unix_ms":"0"})"
                                  "\n"));
}

TEST_F(Df11ctlTest, StatusShowsAGpuWithItsKvPoolAndDriverNumbers) {
  v1::NodeStatus node;
  v1::DeviceStatus* d = node.add_devices();
  d->set_device("cuda:0");
  d->set_description("NVIDIA H100 80GB HBM3 (sm_90, 81559 MiB)");
  d->set_total(80 * kGiB);
  d->set_budget(72 * kGiB);
  d->set_arena(72 * kGiB);
  d->set_driver_free(6 * kGiB);
  d->set_weights(40 * kGiB);
  d->set_scratch(2 * kGiB);
  d->set_kv_cache(kGiB);
  d->set_kv_pool_free(6 * kGiB);
  d->set_workspace(64 * kMiB);
  d->set_used(49 * kGiB + 64 * kMiB);
  d->set_free(23 * kGiB - 64 * kMiB);
  d->set_placeable(23 * kGiB - 64 * kMiB);
  node.set_version("0.1.0");
  host().Set([&](FakeModelHost::Replies& r) { r.node = {node}; });
  const Output o = Run({"status"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out,
            "df11d 0.1.0: 0 models, 0 running, 0 queued\n"
            "\n"
            "DEVICE     TOTAL    BUDGET   WEIGHTS  SCRATCH  KV CACHE  KV FREE  WORKSPACE      USED"
            "      FREE  PLACEABLE\n"
            "cuda:0  80.0 GiB  72.0 GiB  40.0 GiB  2.0 GiB   1.0 GiB  6.0 GiB   64.0 MiB  49.1 GiB"
            "  22.9 GiB   22.9 GiB\n"
            "cuda:0: NVIDIA H100 80GB HBM3 (sm_90, 81559 MiB); driver: 6.0 GiB free of 80.0 GiB "
            "outside df11d's arena of 72.0 GiB\n"
            "\n"
            "no models loaded\n");
}

TEST_F(Df11ctlTest, StatusOfAnEmptyNode) {
  const Output o = Run({"status"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, "df11d: 0 models, 0 running, 0 queued\n\nno devices\n\nno models loaded\n");
}

constexpr char kTopFrame[] =
    "df11d 0.1.0: 1 model, 1 running, 2 queued\n"
    "\n"
    "DEVICE     USED   BUDGET  USE  WEIGHTS   KV CACHE     FREE  PLACEABLE\n"
    "cpu     6.0 GiB  8.0 GiB  75%  4.0 GiB  512.0 MiB  2.0 GiB    3.0 GiB\n"
    "\n"
    "MODEL  STATE  DEVICE   MEMORY   KV CACHE  RUNNING  QUEUED  REQ/S  TOK/S  REQUESTS  TOKENS\n"
    "demo   ready  cpu     5.5 MiB  512.0 KiB        1       2      -      -        12    3456\n";

TEST_F(Df11ctlTest, TopOncePrintsOneFrame) {
  host().Set([](FakeModelHost::Replies& r) { r.node = {Node(), Node(), Node()}; });
  const Output o = Run({"top", "--once", "--interval", "500ms"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, kTopFrame);
  EXPECT_EQ(host().requests().watch.interval_seconds(), 0.5);
}

TEST_F(Df11ctlTest, TopPrintsEveryUpdateUntilTheWatchEnds) {
  host().Set([](FakeModelHost::Replies& r) { r.node = {Node(), Node()}; });
  const Output o = Run({"top"});
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, std::string(kTopFrame) + "\n" + kTopFrame);
  EXPECT_EQ(host().requests().watch.interval_seconds(), 1);

  const Output json = Run({"top", "--json"});
  EXPECT_EQ(json.code, kExitOk);
  const size_t first_line = json.out.find('\n');
  ASSERT_NE(first_line, std::string::npos);
  EXPECT_EQ(json.out, json.out.substr(0, first_line + 1) + json.out.substr(0, first_line + 1));
  EXPECT_THAT(json.out, StartsWith(R"({"devices":[{"device":"cpu",)"));
}

TEST_F(Df11ctlTest, TopShowsRatesBetweenFramesByTheDaemonsClock) {
  v1::NodeStatus first = Node(), second = Node(), third = Node();
  first.set_time_unix_ms(1'000'000);
  second.set_time_unix_ms(1'002'000);  // 2 s later: 6 more requests, 600 more tokens
  second.mutable_models(0)->set_requests_served(18);
  second.mutable_models(0)->set_tokens_generated(4056);
  third.set_time_unix_ms(1'003'000);   // unloaded and loaded again: the counters restarted
  third.mutable_models(0)->set_requests_served(1);
  host().Set([&](FakeModelHost::Replies& r) { r.node = {first, second, third}; });
  const Output o = Run({"top"});
  EXPECT_EQ(o.code, kExitOk);
  const std::vector<std::string> frames =
      absl::StrSplit(o.out, "df11d 0.1.0: ", absl::SkipEmpty());
  ASSERT_EQ(frames.size(), 3u) << o.out;
  EXPECT_THAT(frames[0], HasSubstr("demo   ready  cpu     5.5 MiB  512.0 KiB        1       2"
                                   "      -      -        12    3456"));
  EXPECT_THAT(frames[1], HasSubstr("demo   ready  cpu     5.5 MiB  512.0 KiB        1       2"
                                   "    3.0  300.0        18    4056"));
  EXPECT_THAT(frames[2], HasSubstr("demo   ready  cpu     5.5 MiB  512.0 KiB        1       2"
                                   "      -      -         1    3456"));
}

TEST_F(Df11ctlTest, TopOnATerminalRedrawsInPlace) {
  host().Set([](FakeModelHost::Replies& r) { r.node = {Node(), Node()}; });
  std::ostringstream out, err;
  Console console{out, err, /*out_terminal=*/true, /*err_terminal=*/true};
  EXPECT_EQ(RunDf11ctl({"--addr", server_.address(), "top"}, nullptr, console), kExitOk);
  EXPECT_EQ(out.str(), std::string("\x1b[H\x1b[2J") + kTopFrame + "\x1b[H\x1b[2J" + kTopFrame);
}

TEST_F(Df11ctlTest, BadCommandLinesExitTwoWithoutCallingTheDaemon) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"frobnicate"}, "df11ctl: unknown command 'frobnicate'\nRun 'df11ctl --help' for usage.\n"},
      {{"--verbose", "list"},
       "df11ctl: unknown option --verbose\nRun 'df11ctl --help' for usage.\n"},
      {{"list", "extra"},
       "df11ctl list: unexpected argument 'extra'\nRun 'df11ctl list --help' for usage.\n"},
      {{"get"}, "df11ctl get: expected NAME\nRun 'df11ctl get --help' for usage.\n"},
      {{"load", "a", "--bogus"},
       "df11ctl load: unknown option --bogus\nRun 'df11ctl load --help' for usage.\n"},
      {{"load", "a", "--keep-alive", "soon"},
       "df11ctl load: --keep-alive: \"soon\" is not a duration such as 30s, 5m or 250ms\n"
       "Run 'df11ctl load --help' for usage.\n"},
      {{"unload", "a", "--drain", "-1s"},
       "df11ctl unload: --drain: \"-1s\" is not a duration such as 30s, 5m or 250ms\n"
       "Run 'df11ctl unload --help' for usage.\n"},
      {{"generate", "demo"},
       "df11ctl generate: --prompt is required\nRun 'df11ctl generate --help' for usage.\n"},
      {{"generate", "demo", "--prompt", "x", "--system", "s"},
       "df11ctl generate: --system and --no-thinking need --chat\n"
       "Run 'df11ctl generate --help' for usage.\n"},
      {{"generate", "demo", "--prompt", "x", "--top-p", "2"},
       "df11ctl generate: --top-p must be a number from 0 to 1, not '2'\n"
       "Run 'df11ctl generate --help' for usage.\n"},
      {{"generate", "demo", "--prompt", "x", "--max-tokens", "0"},
       "df11ctl generate: --max-tokens must be an integer from 1 to 2147483647, not '0'\n"
       "Run 'df11ctl generate --help' for usage.\n"},
      {{"top", "--interval", "0"},
       "df11ctl top: --interval must be more than 0\nRun 'df11ctl top --help' for usage.\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0]);
    const Output o = Run(c.args);
    EXPECT_EQ(o.code, kExitUsage);
    EXPECT_EQ(o.out, "");
    EXPECT_EQ(o.err, c.err);
  }
  EXPECT_EQ(host().requests().calls, 0);

  const Output none = RunWithEnv({}, nullptr);
  EXPECT_EQ(none.code, kExitUsage);
  EXPECT_THAT(none.err, StartsWith("df11ctl: control a df11d daemon"));
}

TEST_F(Df11ctlTest, EveryCommandHasHelp) {
  for (const char* command :
       {"load", "unload", "list", "get", "estimate", "generate", "status", "top"}) {
    SCOPED_TRACE(command);
    const Output o = RunWithEnv({command, "--help"}, nullptr);
    EXPECT_EQ(o.code, kExitOk);
    EXPECT_THAT(o.out, StartsWith("Usage: df11ctl " + std::string(command)));
    EXPECT_THAT(o.out, HasSubstr("--json"));
    EXPECT_EQ(RunWithEnv({"help", command}, nullptr).out, o.out);
  }
  const Output top = RunWithEnv({"--help"}, nullptr);
  EXPECT_EQ(top.code, kExitOk);
  EXPECT_THAT(top.out, HasSubstr("Usage: df11ctl [--addr HOST:PORT] [--token-file FILE] COMMAND [ARGS...]"));
  EXPECT_THAT(top.out, HasSubstr("  generate   generate text with a resident model\n"));
  const Output version = RunWithEnv({"--version"}, nullptr);
  EXPECT_EQ(version.code, kExitOk);
  EXPECT_THAT(version.out, MatchesRegex("df11ctl [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  EXPECT_EQ(version.err, "");
}

TEST_F(Df11ctlTest, AddressComesFromFlagThenEnvironment) {
  host().Set([](FakeModelHost::Replies& r) { *r.list.add_models() = DemoModel(); });
  const std::string address = server_.address();
  // DF11_ADDR alone.
  EXPECT_EQ(RunWithEnv({"list", "--json"}, address.c_str()).code, kExitOk);
  // --addr wins over DF11_ADDR, before or after the command.
  EXPECT_EQ(RunWithEnv({"--addr", address, "list"}, "127.0.0.1:1").code, kExitOk);
  EXPECT_EQ(RunWithEnv({"--addr=" + address, "list"}, "127.0.0.1:1").code, kExitOk);
  EXPECT_EQ(RunWithEnv({"list", "--addr", address}, "127.0.0.1:1").code, kExitOk);
  EXPECT_EQ(host().requests().calls, 4);
  EXPECT_EQ(RunWithEnv({"--addr", "", "list"}, address.c_str()).code, kExitUsage);
}

TEST_F(Df11ctlTest, UnreachableDaemonIsUnavailable) {
  std::string address;
  {
    FakeServer gone;
    address = gone.address();
  }
  const Output o = RunWithEnv({"--addr", address, "status"}, nullptr);
  EXPECT_EQ(o.code, kExitFailed);
  EXPECT_THAT(o.err, StartsWith("df11ctl status: UNAVAILABLE: "));
}

// The built binary: main() wires the real streams, the exit code and DF11_ADDR.
struct ProcessResult {
  int code;
  std::string output;  // stdout and stderr
};

ProcessResult RunBinary(const std::string& env, const std::string& args) {
  const char* binary = std::getenv("DF11CTL");
  const std::string command =
      env + " " + (binary != nullptr ? binary : DF11CTL_BINARY) + " " + args + " 2>&1";
  ProcessResult r{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(Df11ctlTest, BinaryUsesDf11AddrAndExitCodes) {
  host().Set([](FakeModelHost::Replies& r) { r.models = {DemoModel()}; });
  const ProcessResult get = RunBinary("DF11_ADDR=" + server_.address(), "get demo");
  EXPECT_EQ(get.code, 0);
  EXPECT_THAT(get.output, StartsWith("name:              demo\nstate:             ready\n"));

  const ProcessResult missing = RunBinary("DF11_ADDR=" + server_.address(), "get nope");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.output, "df11ctl get: NOT_FOUND: unknown model nope\n");

  const ProcessResult usage = RunBinary("", "");
  EXPECT_EQ(usage.code, 2);
  EXPECT_THAT(usage.output, StartsWith("df11ctl: control a df11d daemon"));
}

}  // namespace
}  // namespace df11::ctl
