// heed/seq2seq/text.hpp — the text utilities under d2l's NMT pipeline
// (heed/seq2seq/data.hpp): UTF-8 decoding that validates as RFC 3629 does, UTF-8
// encoding, Python's str.lower() for the scripts of European sentence pairs, the letters
// it knows (for the final-sigma rule) and str.split(sep). Everything here is heed::detail.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "heed/core/error.hpp"

namespace heed {

namespace detail {

/// One decoded code point: `length` bytes, or `error` (a static string) when the bytes
/// at that place are not UTF-8.
struct Utf8Char {
  char32_t code_point = 0;
  std::size_t length = 1;
  const char* error = nullptr;
};

/// Decodes the code point starting at s[i] (i < s.size()), rejecting what RFC 3629
/// rejects: stray continuation bytes, bytes 0xF8–0xFF, truncated sequences, overlong
/// encodings, surrogates and code points above U+10FFFF.
inline Utf8Char decode_utf8(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {lead, 1, nullptr};
  if (lead < 0xC0) return {0, 1, "unexpected continuation byte"};
  if (lead >= 0xF8) return {0, 1, "invalid lead byte"};
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) return {0, k, "truncated sequence"};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  if (cp < kMin[length]) return {0, length, "overlong encoding"};
  if (cp >= 0xD800 && cp <= 0xDFFF) return {0, length, "surrogate code point"};
  if (cp > 0x10FFFF) return {0, length, "code point above U+10FFFF"};
  return {cp, length, nullptr};
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The text as code points; invalid UTF-8 throws ValueError naming `op` and the byte.
inline std::u32string decode_utf8_text(std::string_view text, const char* op) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    HEED_CHECK(!c.error, ValueError, op, ": invalid UTF-8 at byte ", i + 1, ": ", c.error);
    out += c.code_point;
    i += c.length;
  }
  return out;
}

/// Python's str.lower() for one code point, restricted to the scripts of European
/// sentence pairs: ASCII, Latin-1 Supplement (À–Þ except ×), Latin Extended-A
/// (U+0100–U+017F, with İ → "i̇" and Ÿ → ÿ), Greek capitals U+0386–U+03AB and
/// Cyrillic capitals U+0400–U+042F. Other code points are returned unchanged, where
/// Python would lowercase some of them (Armenian, Georgian, Latin Extended-B, …).
/// Capital sigma is handled by the caller (final-sigma rule). U+0130 is the only code
/// point that lowercases to two: U+0069 U+0307, written to `second`.
inline char32_t to_lower(char32_t c, char32_t* second) {
  *second = 0;
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) {  // İ → i + combining dot above
      *second = 0x307;
      return U'i';
    }
    if (c == 0x178) return 0xFF;
    // Pairs (capital, small) start on even code points in U+0100–U+0137 and
    // U+014A–U+0177, on odd ones in U+0139–U+0148 and U+0179–U+017E; ı, ĸ, ŉ, ſ have none.
    const bool even_pairs = c <= 0x137 || (c >= 0x14A && c <= 0x177);
    const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if ((even_pairs && c % 2 == 0) || (odd_pairs && c % 2 == 1)) return c + 1;
    return c;
  }
  if (c == 0x386) return 0x3AC;                               // Ά → ά
  if (c >= 0x388 && c <= 0x38A) return c + 37;                // Έ Ή Ί
  if (c == 0x38C) return 0x3CC;                               // Ό
  if (c == 0x38E || c == 0x38F) return c + 63;                // Ύ Ώ
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Α–Ω, Ϊ, Ϋ
  if (c >= 0x400 && c <= 0x40F) return c + 80;                // Ѐ–Џ
  if (c >= 0x410 && c <= 0x42F) return c + 32;                // А–Я
  return c;
}

/// Whether c is a letter to_lower knows (upper or lower case), for the final-sigma rule.
inline bool is_cased_letter(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  if (c >= 0xC0 && c <= 0x17F) return c != 0xD7 && c != 0xF7;
  return (c >= 0x386 && c <= 0x3CE && c != 0x387) || (c >= 0x400 && c <= 0x45F);
}

/// Splits on every `sep`, keeping empty pieces, as Python's str.split(sep).
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(sep, start);
    parts.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

/// Python's s.split(): runs of whitespace separate tokens; none is empty.
inline std::vector<std::string> split_on_whitespace(const std::string& s) {
  std::vector<std::string> tokens;
  const char* const space = " \t\n\r\f\v";
  for (std::string::size_type begin = s.find_first_not_of(space); begin != std::string::npos;) {
    const std::string::size_type end = s.find_first_of(space, begin);
    tokens.push_back(s.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    begin = end == std::string::npos ? end : s.find_first_not_of(space, end);
  }
  return tokens;
}

/// Words joined by single spaces, as Python's ' '.join(words).
inline std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace detail

}  // namespace heed
