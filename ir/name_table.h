// An option's names, listed once in a constexpr table of (name, enum value)
// pairs: parsed into the enum at the edge (a config's field, a command-line
// flag), printed from it, and offered as the choices of a message or --help.
//
//   constexpr NameTable<Colour, 2> kColourNames{{{"red", Colour::kRed}, {"blue", Colour::kBlue}}};
//   FromName(kColourNames, "blue");  // Colour::kBlue;  NameOf(kColourNames, Colour::kRed) == "red"
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace twinpipe::ir {

template <typename T, size_t N>
using NameTable = std::array<std::pair<std::string_view, T>, N>;

// The value's name; "?" for a value the table does not list.
template <typename T, size_t N>
constexpr std::string_view NameOf(const NameTable<T, N>& names, T value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

// The value a name stands for (exact, case-sensitive match); none if unknown.
template <typename T, size_t N>
constexpr std::optional<T> FromName(const NameTable<T, N>& names, std::string_view name) {
  for (const auto& [n, v] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// The names in table order, for a message's or a flag's list of choices.
template <typename T, size_t N>
std::vector<std::string> Names(const NameTable<T, N>& names) {
  std::vector<std::string> out;
  out.reserve(N);
  for (const auto& [name, value] : names) out.emplace_back(name);
  return out;
}

}  // namespace twinpipe::ir
