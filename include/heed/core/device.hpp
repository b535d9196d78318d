// heed/core/device.hpp — where a tensor's data lives: the CPU or a CUDA device.
//
//   heed::Device gpu = heed::Device::cuda();        // cuda:0; also Device("cuda:1")
//   if (heed::cuda_is_available()) model.to(gpu);   // see nn/module.hpp, Tensor::to
//
// Devices exist in every build, so that code naming them compiles without CUDA; a
// program without the CUDA backend (CMake target heed::cuda) has no CUDA device, and
// moving a tensor to one throws DeviceError saying so. What serves a device is in
// heed/core/backend.hpp.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "heed/core/error.hpp"

namespace heed {

enum class DeviceType : std::uint8_t { cpu, cuda };

class Device {
 public:
  /// The CPU.
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(type == DeviceType::cpu ? 0 : index) {
    if (index < 0) throw ValueError(detail::concat("Device: index must not be negative, got ", index));
  }
  /// "cpu", "cuda" (device 0) or "cuda:N", as in PyTorch.
  explicit Device(const std::string& spec);

  static constexpr Device cpu() { return Device(); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::cuda, index); }

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type_ == DeviceType::cuda; }

  friend constexpr bool operator==(Device a, Device b) { return a.type_ == b.type_ && a.index_ == b.index_; }
  friend constexpr bool operator!=(Device a, Device b) { return !(a == b); }

 private:
  DeviceType type_ = DeviceType::cpu;
  int index_ = 0;
};

/// "cpu" or "cuda:N".
inline std::string to_string(Device device) {
  return device.is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(device.index());
}

inline std::ostream& operator<<(std::ostream& out, Device device) { return out << to_string(device); }

inline Device::Device(const std::string& spec) {
  if (spec == "cpu") return;
  const std::string prefix = "cuda";
  const bool cuda = spec.compare(0, prefix.size(), prefix) == 0;
  std::size_t pos = prefix.size();
  int index = 0;
  if (cuda && spec.size() > pos) {
    bool digits = spec[pos] == ':' && spec.size() > pos + 1 && spec.size() <= pos + 6;
    for (std::size_t i = pos + 1; digits && i < spec.size(); ++i) digits = spec[i] >= '0' && spec[i] <= '9';
    if (!digits) throw ValueError("Device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"" + spec + "\"");
    index = std::stoi(spec.substr(pos + 1));
  } else if (!cuda) {
    throw ValueError("Device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"" + spec + "\"");
  }
  *this = Device::cuda(index);
}

}  // namespace heed
