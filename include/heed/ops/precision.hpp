// heed/ops/precision.hpp — the number formats a net's products can run in.
//
//   fp32  float throughout (heed's default, and its reference)
//   bf16  bf16 operands, fp32 accumulation and everything else (vdpbf16ps)
//   int8  int8 weights (per output row) and activations (per row, found on the fly),
//         int32 accumulation, fp32 everything else (vpdpbusd): decoding only
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/core/error.hpp"

namespace heed {

enum class Precision { fp32, bf16, int8 };

inline const char* to_string(Precision p) {
  switch (p) {
    case Precision::bf16:
      return "bf16";
    case Precision::int8:
      return "int8";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

/// "fp32", "bf16" or "int8"; a ValueError naming `what` (a flag, an option) otherwise.
inline Precision parse_precision(const std::string& text, const std::string& what = "precision") {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::int8})
    if (text == to_string(p)) return p;
  throw ValueError(what + " wants fp32, bf16 or int8, got '" + text + "'");
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
