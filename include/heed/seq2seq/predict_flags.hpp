// heed/seq2seq/predict_flags.hpp — PredictOptions from command-line flags, as translate
// takes them (--beam, --n-best, --length-penalty, --sample, --temperature, --top-k,
// --top-p, --min-length, --max-length, --no-repeat-ngram), with the checked readers of
// the values that any program's flags can use: an integer in a range, a 64-bit seed, a
// real number in a range. Each refusal is a ValueError naming the flag, its range and the
// text given, as "--beam wants an integer in [1, 1024], got 'x'".
//
//   heed::PredictOptions options;
//   for (int i = 1; i + 1 < argc; i += 2)
//     if (!heed::parse_predict_flag(argv[i], argv[i + 1], options)) ...;   // not a decoding flag
//   std::cout << heed::kPredictFlagsUsage;                                  // their help lines
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "heed/core/error.hpp"
#include "heed/seq2seq/predict_options.hpp"

namespace heed {

/// The flags' upper bounds: beyond them a value is a mistake, and beams and lengths that
/// large would exhaust memory (or overflow) before they said so. The model's own limit on
/// lengths is checked once it is built.
inline constexpr index_t kMaxBeamFlag = 1024;
inline constexpr index_t kMaxLengthFlag = index_t(1) << 20;

/// The help lines of parse_predict_flag's flags, for a program's usage.
inline constexpr const char* kPredictFlagsUsage =
    "  --beam           beam width, 1 to 1024; 1 (default) decodes greedily; with --sample, samples\n"
    "                   per sentence\n"
    "  --n-best         hypotheses printed per sentence, best first with their scores (<= --beam)\n"
    "  --length-penalty beam search's alpha in log P / length^alpha, 0 to 10 (default 0.75)\n"
    "  --sample         draw each token instead of taking the best, from a generator seeded by --seed\n"
    "  --temperature    sampling: divide the logits by T (default 1)\n"
    "  --top-k          sampling: only the K most probable tokens (default 0: all)\n"
    "  --top-p          sampling: only the fewest tokens holding probability P (default 1: all)\n"
    "  --min-length     no <eos> before N tokens (default 0; at most the tokens decoded)\n"
    "  --max-length     N tokens at most (default 0: the model's num_steps; at most the positions\n"
    "                   the model has: 1000 for the Transformer's positional encoding)\n"
    "  --no-repeat-ngram no N-gram twice in a translation, N up to 1024 (default 0: off)\n"
    "  --precision      the products' format: fp32 (default), bf16, or int8 (weights and activations\n"
    "                   scaled per row); a model on the CPU only\n";

/// An integer in [min, max], in decimal digits (a leading '-' for negatives).
inline index_t parse_integer_flag(const std::string& flag, const std::string& text, index_t min, index_t max) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  const bool starts_well = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
  if (!starts_well || *end != '\0' || errno == ERANGE || value < min || value > max)
    throw ValueError(flag + " wants an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" +
                     text + "'");
  return static_cast<index_t>(value);
}

/// An unsigned 64-bit integer: strtoull alone would take "-1" as 2^64 - 1.
inline std::uint64_t parse_seed_flag(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || errno == ERANGE)
    throw ValueError(flag + " wants an integer in [0, " + std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                     "], got '" + text + "'");
  return static_cast<std::uint64_t>(value);
}

/// A real number in (low, high] (or [low, high] when low_included).
inline double parse_real_flag(const std::string& flag, const std::string& text, double low, double high,
                              bool low_included) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  const bool above = low_included ? value >= low : value > low;
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) || !above || value > high) {
    std::ostringstream range;
    range << (low_included ? "[" : "(") << low << ", " << high << "]";
    throw ValueError(flag + " wants a number in " + range.str() + ", got '" + text + "'");
  }
  return value;
}

/// Whether parse_predict_flag reads `flag` (--sample among them, the one without a value).
inline bool is_predict_flag(const std::string& flag) {
  for (const char* name : {"--beam", "--n-best", "--length-penalty", "--sample", "--temperature", "--top-k", "--top-p",
                           "--min-length", "--max-length", "--no-repeat-ngram", "--precision"})
    if (flag == name) return true;
  return false;
}

/// Sets what `flag` (one of kPredictFlagsUsage's; --sample takes no value, and `value` is
/// not read for it) says in `options`, and returns true; false for any other flag. A bad
/// value is a ValueError. n_best <= beam_size is the caller's to check once every flag is
/// read.
inline bool parse_predict_flag(const std::string& flag, const std::string& value, PredictOptions& options) {
  if (flag == "--beam")
    options.beam_size = parse_integer_flag(flag, value, 1, kMaxBeamFlag);
  else if (flag == "--n-best")
    options.n_best = parse_integer_flag(flag, value, 1, kMaxBeamFlag);
  else if (flag == "--length-penalty")
    options.length_penalty = parse_real_flag(flag, value, 0.0, 10.0, true);
  else if (flag == "--sample")
    options.sample = true;
  else if (flag == "--temperature")
    options.temperature = parse_real_flag(flag, value, 0.0, 1e6, false);
  else if (flag == "--top-k")
    options.top_k = parse_integer_flag(flag, value, 0, index_t(1) << 30);
  else if (flag == "--top-p")
    options.top_p = parse_real_flag(flag, value, 0.0, 1.0, false);
  else if (flag == "--min-length")
    options.min_length = parse_integer_flag(flag, value, 0, kMaxLengthFlag);
  else if (flag == "--max-length")
    options.max_length = parse_integer_flag(flag, value, 0, kMaxLengthFlag);
  else if (flag == "--no-repeat-ngram")
    options.no_repeat_ngram_size = parse_integer_flag(flag, value, 0, 1024);
  else if (flag == "--precision")
    options.precision = parse_precision(value, flag);
  else
    return false;
  return true;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
