// heed/dist/settings.hpp — that every rank was given the same settings. Ranks that
// draw other batches, other dropout masks or other epochs still sum their gradients
// without an error, into a model none of them meant to train; DataParallel compares
// the models' shapes only, this compares what the ranks were told.
//
//   heed::dist::check_same_settings(world, {{"--epochs", "2"}, {"--seed", "1"}}, "translate");
//   // rank 1 given --seed 2: ValueError on every rank,
//   // "translate: ranks were given different settings: --seed is '1' on rank 0 and '2' on rank 1"
//   std::uint64_t h = heed::dist::fnv1a(text.data(), text.size());  // data too large to compare: its hash
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/detail/inline.hpp"
#include "heed/dist/communicator.hpp"

namespace heed {
namespace dist {

/// Compares this rank's settings (name → value as text) with every other rank's; a
/// collective, which every rank calls. Returns if all are the same; otherwise throws
/// ValueError on every rank, naming the lowest rank that differs from rank 0, the first
/// setting (in the map's order) where it does, and both values (a setting one rank
/// lacks is "not set" there). `operation` starts the message (empty: nothing, for a
/// caller that adds its own name).
void check_same_settings(Communicator& communicator, const std::map<std::string, std::string>& settings,
                         const std::string& operation = "check_same_settings");

/// FNV-1a, 64 bits, of bytes[0, size), continuing from `hash`: a fingerprint of data
/// the ranks should share (fnv1a(b, nb, fnv1a(a, na)) is that of a followed by b). Not
/// cryptographic: it tells mistakes apart, not attacks.
constexpr std::uint64_t kFnv1aOffset = 14695981039346656037ull;
inline std::uint64_t fnv1a(const void* bytes, std::size_t size, std::uint64_t hash = kFnv1aOffset) {
  const auto* at = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ at[i]) * 1099511628211ull;
  return hash;
}

namespace detail {

// Settings as one text: each name and value as its length, ':', its bytes (any bytes).
inline void append_field(std::string& out, const std::string& field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

inline std::string encode_settings(const std::map<std::string, std::string>& settings) {
  std::string out;
  for (const auto& [name, value] : settings) append_field(out, name), append_field(out, value);
  return out;
}

// The inverse of encode_settings (the text comes from heed's own rank 0).
inline std::map<std::string, std::string> decode_settings(const std::string& text) {
  std::map<std::string, std::string> settings;
  std::size_t at = 0;
  const auto field = [&] {
    std::size_t length = 0, colon = at;
    for (; colon < text.size() && text[colon] >= '0' && text[colon] <= '9' && colon - at < 19; ++colon)
      length = length * 10 + static_cast<std::size_t>(text[colon] - '0');
    HEED_CHECK(colon > at && colon < text.size() && text[colon] == ':' && length <= text.size() - colon - 1,
               CommunicationError, "check_same_settings: rank 0's settings are garbled");
    at = colon + 1 + length;
    return text.substr(colon + 1, length);
  };
  while (at < text.size()) {
    std::string name = field();
    settings[std::move(name)] = field();
  }
  return settings;
}

inline std::string describe_setting(const std::map<std::string, std::string>& settings, const std::string& name) {
  const auto it = settings.find(name);
  return it == settings.end() ? "not set" : "'" + it->second + "'";
}

}  // namespace detail

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE void check_same_settings(Communicator& communicator, const std::map<std::string, std::string>& settings,
                                     const std::string& operation) {
  const int ranks = communicator.size(), me = communicator.rank();
  if (ranks == 1) return;
  std::string root_text = detail::encode_settings(settings);
  communicator.broadcast(root_text, 0);
  const std::map<std::string, std::string> root = detail::decode_settings(root_text);
  // This rank's first difference from rank 0, in name order over both maps' names.
  std::string first;
  bool differs = false;
  for (auto mine = settings.begin(), theirs = root.begin(); mine != settings.end() || theirs != root.end();) {
    if (theirs == root.end() || (mine != settings.end() && mine->first < theirs->first)) {
      first = mine->first, differs = true;  // set here, not on rank 0
      break;
    }
    if (mine == settings.end() || theirs->first < mine->first) {
      first = theirs->first, differs = true;  // set on rank 0, not here
      break;
    }
    if (mine->second != theirs->second) {
      first = mine->first, differs = true;
      break;
    }
    ++mine, ++theirs;
  }
  // Who differs: a flag per rank, summed (exact in double).
  std::vector<double> flags(static_cast<std::size_t>(ranks), 0.0);
  flags[static_cast<std::size_t>(me)] = differs ? 1.0 : 0.0;
  communicator.allreduce_sum(flags.data(), flags.size());
  for (int r = 1; r < ranks; ++r) {
    if (flags[static_cast<std::size_t>(r)] == 0.0) continue;
    // Rank r tells the others which setting and its value there.
    std::string name = r == me ? first : std::string();
    communicator.broadcast(name, r);
    std::string value = r == me ? detail::describe_setting(settings, name) : std::string();
    communicator.broadcast(value, r);
    throw ValueError((operation.empty() ? operation : operation + ": ") +
                     "ranks were given different settings: " + name + " is " + detail::describe_setting(root, name) +
                     " on rank 0 and " + value + " on rank " + std::to_string(r));
  }
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace dist
}  // namespace heed
