// The execute path on schedules from files: the first byte picks the reader
// (text, JSON or torch CSV), the rest is the file. A small schedule that
// verifies is planned on a tiny MLP and trained for one step on the CPU
// backend; it must run (or be refused as bad input, never crash or hang) and
// end with the parameters of the unpartitioned run on the same batch
// (GPipe's guarantee; with replicas, of the global batch), whatever ids, peers, devices, stages or bytes the file
// gave.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cost_models/config.h"
#include "execute/runtime.h"
#include "fuzz/schedule_checks.h"
#include "ir/json_format.h"
#include "ir/text_format.h"
#include "ir/torch_csv.h"
#include "ir/verifier.h"
#include "partition/pipeline_plan.h"

namespace {

using namespace twinpipe;

std::optional<ir::Schedule> Read(uint8_t format, std::string_view text) {
  switch (format % 3) {
    case 0: {
      auto s = ir::ParseText(text, "fuzz.txt");
      return s ? std::optional(std::move(*s)) : std::nullopt;
    }
    case 1: {
      auto s = ir::ParseJson(text, "fuzz.json");
      return s ? std::optional(std::move(*s)) : std::nullopt;
    }
    default: {
      auto r = ir::ImportTorchCsv(text, "fuzz.csv", ir::TorchDialect::kAuto);
      return r ? std::optional(std::move(r->schedule)) : std::nullopt;
    }
  }
}

// A tiny MLP on `devices` CPU devices x `replicas`, `batch` samples per
// replica in `micro_batches`.
cost::Config TinyConfig(int layers, int devices, int replicas, int batch, int micro_batches) {
  auto c = cost::LoadConfig(
      fmt::format(R"({{"model": {{"generator": "mlp", "layers": {}, "width": 6, "input": 4, "classes": 3}},
          "training": {{"batch": {}, "microbatches": {}, "optimizer": "sgd", "learning_rate": 0.1}},
          "pipeline": {{"stages": {}, "schedule": "gpipe"}},
          "cluster": {{"device": "CPU", "devices": {}, "link": "inproc"}}}})",
                  layers, batch, micro_batches, devices, devices * replicas),
      "tiny.json");
  fuzz::Require(c.has_value(), "the tiny config loads");
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto s = Read(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  if (!s) return 0;
  if (s->NumOps() > 400 || s->num_devices > 4 || s->num_stages > 8 || s->num_micro_batches > 8 || s->replicas < 1 ||
      s->replicas > 3) {
    return 0;
  }
  if (!ir::Verify(*s).empty()) return 0;
  const int layers = std::max(2, s->num_stages + 1);
  const int batch = 2 * s->num_micro_batches;  // per replica
  const cost::Config config = TinyConfig(layers, s->num_devices, s->replicas, batch, s->num_micro_batches);
  auto plan = partition::PlanForSchedule(config, *s);
  if (!plan) {
    fuzz::Require(plan.error().kind == ErrorKind::kBadInput, "planning a verified schedule fails only on its input");
    return 0;
  }
  auto run = execute::ExecuteCpu(config, *plan, {.steps = 1, .timeout_s = 10});
  if (!run) {
    std::fprintf(stderr, "%s\n", run.error().message.c_str());
    fuzz::Require(false, "a verified schedule executes");
  }
  // The same samples (every replica's) as one micro-batch on one device.
  const cost::Config whole = TinyConfig(layers, 1, 1, batch * s->replicas, 1);
  auto ref_plan = partition::PlanFromConfig(whole);
  fuzz::Require(ref_plan.has_value(), "the unpartitioned plan builds");
  auto ref = execute::ExecuteCpu(whole, *ref_plan, {.steps = 1, .timeout_s = 10});
  fuzz::Require(ref.has_value(), "the unpartitioned run executes");
  fuzz::Require(ref->parameters.size() == run->parameters.size(), "both runs hold the same parameters");
  for (size_t i = 0; i < ref->parameters.size(); ++i) {
    const double a = run->parameters[i], b = ref->parameters[i];
    fuzz::Require(std::abs(a - b) <= 1e-5 * (1 + std::abs(b)), "GPipe's guarantee: the unpartitioned parameters");
  }
  return 0;
}
