// heed/io/crc32c.hpp — CRC-32C (Castagnoli), the checksum heed writes beside each tensor
// of a checkpoint so that a load notices changed bytes.
//
//   std::uint32_t crc = heed::crc32c(bytes, size);        // crc32c("123456789") == 0xE3069283
//   crc = heed::crc32c(more, more_size, crc);             // the CRC of bytes followed by more
//
// The CRC of iSCSI, ext4 and Btrfs (polynomial 0x1EDC6F41, reflected, initial value and
// final XOR 0xFFFFFFFF). On x86-64 CPUs with SSE4.2 it runs on the CPU's crc32
// instruction, 8 bytes an instruction (several GB/s); elsewhere eight tables of 256
// entries take 8 bytes a step (slice-by-8, about a byte a cycle).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define HEED_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace heed {
namespace detail {

using Crc32cTables = std::array<std::array<std::uint32_t, 256>, 8>;

/// Table k maps a byte to its CRC followed by k zero bytes, so that slice-by-8 combines
/// eight table look-ups into one step over 8 bytes.
constexpr Crc32cTables make_crc32c_tables() {
  Crc32cTables tables{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));  // reflected 0x1EDC6F41
    tables[0][byte] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t byte = 0; byte < 256; ++byte)
      tables[k][byte] = (tables[k - 1][byte] >> 8) ^ tables[0][tables[k - 1][byte] & 0xFF];
  return tables;
}

inline constexpr Crc32cTables kCrc32cTables = make_crc32c_tables();

/// 8 bytes as a little-endian integer, whatever the host's byte order and alignment.
inline std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

/// The running (inverted) CRC register after `size` more bytes, by slice-by-8.
inline std::uint32_t crc32c_update_portable(std::uint32_t crc, const unsigned char* p, std::size_t size) {
  const Crc32cTables& t = kCrc32cTables;
  for (; size >= 8; p += 8, size -= 8) {
    const std::uint64_t word = load_le64(p) ^ crc;
    crc = t[7][word & 0xFF] ^ t[6][(word >> 8) & 0xFF] ^ t[5][(word >> 16) & 0xFF] ^ t[4][(word >> 24) & 0xFF] ^
          t[3][(word >> 32) & 0xFF] ^ t[2][(word >> 40) & 0xFF] ^ t[1][(word >> 48) & 0xFF] ^ t[0][word >> 56];
  }
  for (; size > 0; ++p, --size) crc = (crc >> 8) ^ t[0][(crc ^ *p) & 0xFF];
  return crc;
}

#if defined(HEED_CRC32C_X86)
/// As crc32c_update_portable, on SSE4.2's crc32 instruction; call only where
/// crc32c_hardware() is true. The attribute enables the instruction for this function
/// alone, so the rest of the program needs no -msse4.2.
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_update_sse42(std::uint32_t crc, const unsigned char* p,
                                                                           std::size_t size) {
  std::uint64_t wide = crc;
  for (; size >= 8; p += 8, size -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // x86 is little-endian; memcpy, as p may be unaligned
    wide = _mm_crc32_u64(wide, word);
  }
  crc = static_cast<std::uint32_t>(wide);
  for (; size > 0; ++p, --size) crc = _mm_crc32_u8(crc, *p);
  return crc;
}
#endif

/// Whether crc32c() runs on the CPU's crc32 instruction.
inline bool crc32c_hardware() {
#if defined(HEED_CRC32C_X86)
  static const bool supported = __builtin_cpu_supports("sse4.2");
  return supported;
#else
  return false;
#endif
}

}  // namespace detail

/// The CRC-32C of `size` bytes at `data`. Passing the CRC of earlier bytes as `crc`
/// continues it: crc32c(b, nb, crc32c(a, na)) is the CRC of a followed by b.
inline std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(HEED_CRC32C_X86)
  if (detail::crc32c_hardware()) return ~detail::crc32c_update_sse42(~crc, p, size);
#endif
  return ~detail::crc32c_update_portable(~crc, p, size);
}

}  // namespace heed
