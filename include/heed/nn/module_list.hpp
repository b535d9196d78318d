// heed/nn/module_list.hpp — an owning, indexable list of child modules of one type.
//
//   heed::ModuleList<float, EncoderBlock<float>> blks("Sequential");
//   blks.push_back("block0", std::make_unique<EncoderBlock<float>>(...));
//   for (auto& blk : blks) X = (*blk)(X, valid_lens);
//
// Children are registered under the names given, so parameter names read as in
// PyTorch (`blks.block0.attention.W_q.weight` for d2l's nn.Sequential of blocks).
// Modules are neither copyable nor movable, hence the unique_ptrs.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <memory>
#include <string>
#include <vector>

#include "heed/nn/module.hpp"

namespace heed {

template <typename T, typename M>
class ModuleList : public Module<T> {
 public:
  /// type_name is what repr() prints: "Sequential" matches d2l's summaries.
  explicit ModuleList(std::string type_name = "ModuleList") : Module<T>(std::move(type_name)) {}

  M& push_back(const std::string& name, std::unique_ptr<M> module) {
    HEED_CHECK(module != nullptr, ValueError, this->type_name(), ".push_back: module '", name, "' is null");
    this->register_module(name, *module);
    modules_.push_back(std::move(module));
    return *modules_.back();
  }

  std::size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  M& operator[](std::size_t i) { return *modules_.at(i); }
  const M& operator[](std::size_t i) const { return *modules_.at(i); }
  auto begin() { return modules_.begin(); }
  auto end() { return modules_.end(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::unique_ptr<M>> modules_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
