// heed/nn/module_list.hpp — an owning, indexable list of child modules of one type.
//
//   heed::ModuleList<float, EncoderBlock<float>> blks("Sequential");
//   blks.push_back("block0", std::make_unique<EncoderBlock<float>>(...));
//   for (auto& blk : blks) X = (*blk)(X, valid_lens);
//
//   heed::ModuleList layers(std::make_unique<heed::Linear<float>>(2, 3),   // ModuleList<float, Linear<float>>,
//                           std::make_unique<heed::Linear<float>>(3, 1));  // children "0" and "1"
//
// Children are registered under the names given, so parameter names read as in
// PyTorch (`blks.block0.attention.W_q.weight` for d2l's nn.Sequential of blocks), or
// under their indices as torch.nn.ModuleList names them ("0.weight") when appended.
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

  /// The modules appended in order, as torch.nn.ModuleList([...]); with the deduction
  /// guide below, T and M come from the first module (the others must convert to M).
  template <typename... Ms>
  explicit ModuleList(std::unique_ptr<M> first, std::unique_ptr<Ms>... rest) : ModuleList() {
    append(std::move(first));
    (append(std::move(rest)), ...);
  }

  M& push_back(const std::string& name, std::unique_ptr<M> module) { return add("push_back", name, std::move(module)); }

  /// Adds a module named by its index, "0", "1", …, as torch.nn.ModuleList.append.
  M& append(std::unique_ptr<M> module) { return add("append", std::to_string(size()), std::move(module)); }

  std::size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  M& operator[](std::size_t i) { return *modules_.at(i); }
  const M& operator[](std::size_t i) const { return *modules_.at(i); }
  auto begin() { return modules_.begin(); }
  auto end() { return modules_.end(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  M& add(const char* op, const std::string& name, std::unique_ptr<M> module) {
    HEED_CHECK(module != nullptr, ValueError, this->type_name(), ".", op, ": module '", name, "' is null");
    this->register_module(name, *module);
    modules_.push_back(std::move(module));
    return *modules_.back();
  }

  std::vector<std::unique_ptr<M>> modules_;
};

/// ModuleList(std::make_unique<Linear<float>>(2, 3), ...) is a ModuleList<float, Linear<float>>.
template <typename M, typename... Ms>
ModuleList(std::unique_ptr<M>, std::unique_ptr<Ms>...) -> ModuleList<detail::module_value_t<M>, M>;

}  // namespace heed

#include "heed/detail/header_end.hpp"
