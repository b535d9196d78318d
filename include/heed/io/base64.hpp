// heed/io/base64.hpp — bytes as RFC 4648 base64 text and back, for binary data kept in
// a checkpoint's metadata (a SentencePiece model, heed/seq2seq/sentencepiece.hpp), whose
// values are JSON strings.
//
//   std::string text = heed::base64_encode(bytes);
//   std::string back = heed::base64_decode(text, "model.safetensors: heed.src_spm");
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "heed/core/error.hpp"

namespace heed {

/// `bytes` in the standard alphabet, padded with '=' to a multiple of 4 characters.
inline std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = bytes.size() - i < 3 ? bytes.size() - i : 3;
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j) group = (group << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (std::size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(group >> (18 - 6 * j)) & 63u] : '=';
  }
  return out;
}

/// The bytes of base64 `text` (the standard alphabet, padding required). Anything else
/// throws FileError naming `what` and the first bad position.
inline std::string base64_decode(std::string_view text, std::string_view what) {
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  HEED_CHECK(text.size() % 4 == 0, FileError, what, ": not base64: ", text.size(), " characters, not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    // '=' only at the end: one or two of them.
    const std::size_t padding = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const int v = j < 4 - padding ? value(text[i + j]) : 0;
      HEED_CHECK(v >= 0, FileError, what, ": not base64: character ", i + j, " is '", std::string(1, text[i + j]), "'");
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    for (std::size_t j = 0; j < 3 - padding; ++j) out += static_cast<char>((group >> (16 - 8 * j)) & 255u);
  }
  return out;
}

}  // namespace heed
