// The executor's options as types, named once: the optimizer (the config's
// /training/optimizer, parsed where the executor starts: OptimizerOf in
// execute/optimizer.h), and the CUDA backend's transport between devices and
// GEMM arithmetic (the command line parses twinpipe execute --transport and
// --precision into these). The backends switch on the types, never on names.
//
//   std::optional<TransportKind> t = TransportFromName("p2p");
//   TransportName(TransportKind::kHostStaged);  // "host-staged"
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace twinpipe::execute {

// auto: local on one GPU, p2p or host-staged between GPUs, nccl between MPI
// ranks; otherwise the one named, for every pair of devices.
enum class TransportKind { kAuto, kNccl, kP2p, kHostStaged, kLocal };

// fp32; TF32 tensor cores with fp32 accumulation; or BF16 inputs (converted
// on the fly) with fp32 accumulation and output.
enum class Precision { kFp32, kTf32, kBf16 };

// SGD with momentum, or Adam (execute/optimizer.h).
enum class OptimizerKind { kAdam, kSgd };

inline constexpr std::array<std::pair<std::string_view, OptimizerKind>, 2> kOptimizerNames{{
    {"adam", OptimizerKind::kAdam},
    {"sgd", OptimizerKind::kSgd},
}};
inline constexpr std::array<std::pair<std::string_view, TransportKind>, 5> kTransportNames{{
    {"auto", TransportKind::kAuto},
    {"nccl", TransportKind::kNccl},
    {"p2p", TransportKind::kP2p},
    {"host-staged", TransportKind::kHostStaged},
    {"local", TransportKind::kLocal},
}};
inline constexpr std::array<std::pair<std::string_view, Precision>, 3> kPrecisionNames{{
    {"fp32", Precision::kFp32},
    {"tf32", Precision::kTf32},
    {"bf16", Precision::kBf16},
}};

template <typename T, size_t N>
constexpr std::string_view NameOf(const std::array<std::pair<std::string_view, T>, N>& names, T value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}
template <typename T, size_t N>
constexpr std::optional<T> FromName(const std::array<std::pair<std::string_view, T>, N>& names, std::string_view name) {
  for (const auto& [n, v] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

constexpr std::string_view OptimizerName(OptimizerKind o) { return NameOf(kOptimizerNames, o); }
constexpr std::optional<OptimizerKind> OptimizerFromName(std::string_view n) { return FromName(kOptimizerNames, n); }
constexpr std::string_view TransportName(TransportKind t) { return NameOf(kTransportNames, t); }
constexpr std::string_view PrecisionName(Precision p) { return NameOf(kPrecisionNames, p); }
constexpr std::optional<TransportKind> TransportFromName(std::string_view n) { return FromName(kTransportNames, n); }
constexpr std::optional<Precision> PrecisionFromName(std::string_view n) { return FromName(kPrecisionNames, n); }

}  // namespace twinpipe::execute
