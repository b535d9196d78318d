// heed/io/training_checkpoint.hpp — what resuming training needs in one safetensors
// file: a module's parameters and Adam's state for each of them.
//
//   heed::save_training_checkpoint(net, optimizer, "last.safetensors",
//                                  {{"loader_generator", loader.generator().get_state()}});
//   // later, in a new process, after building the same net and optimizer:
//   auto meta = heed::load_training_checkpoint(net, optimizer, "last.safetensors");
//   loader.generator().set_state(meta.at("loader_generator"));
//
// The parameters are stored as save_checkpoint stores them (so load_checkpoint cannot
// read the file, which holds more, but read_safetensors_metadata and PyTorch's
// safetensors can), and Adam's moments as "optimizer.exp_avg.<name>" and
// "optimizer.exp_avg_sq.<name>" for each parameter it has updated; the step counts, in
// the order of the optimizer's parameters, go in the metadata under "heed.adam.steps".
// Adam's hyper-parameters are not stored: the caller's optimizer keeps its own (a run
// may resume with another learning rate). The caller's metadata travels with it
// (generators' states, the epoch, the vocabularies). Saving is atomic; loading reads and
// checks everything first, so a file of another model or optimizer throws FileError
// saying what differs and changes neither the module nor the optimizer.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/io/checkpoint.hpp"
#include "heed/optim/adam.hpp"
#include "heed/optim/ema.hpp"

namespace heed {

namespace detail {

constexpr const char* kAdamStepsKey = "heed.adam.steps";
constexpr const char* kEmaUpdatesKey = "heed.ema.updates";

/// A token or value for a message: quoted, cut short (a hostile one may be long).
inline std::string quoted(const std::string& text) {
  return "'" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) + "'";
}

/// A count as train_translator writes it (std::to_string): decimal digits alone, no
/// sign, exponent, fraction or space, within index_t. strtod would read "0.5" or "1e15".
inline bool parse_count(const std::string& text, index_t& out) {
  if (text.empty()) return false;
  index_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const index_t digit = c - '0';
    if (value > (std::numeric_limits<index_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

/// The optimizer's parameters by their names in `module`, in the optimizer's order;
/// `op` names the caller in the error when one is not the module's.
template <typename T>
std::vector<std::string> optimizer_parameter_names(const Module<T>& module, const Adam<T>& optimizer, const char* op) {
  std::map<const TensorImpl<T>*, std::string> name_of;
  for (const auto& [name, parameter] : module.named_parameters()) name_of.emplace(&impl(parameter), name);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < optimizer.params().size(); ++i) {
    const auto it = name_of.find(&impl(optimizer.params()[i]));
    HEED_CHECK(it != name_of.end(), ValueError, op, ": the optimizer's parameter ", i, " (shape ",
               to_string(optimizer.params()[i].shape()), ") is not a parameter of the module");
    names.push_back(it->second);
  }
  return names;
}

}  // namespace detail

/// Saves the module's parameters, the optimizer's state and `metadata` to `path`
/// (atomically), as the top of this file says. The optimizer's parameters must be the
/// module's (ValueError otherwise); "heed.adam.steps" is heed's key in the metadata.
///
/// With `ema` (started: train_seq2seq's TrainOptions::ema), its averages go too, F32, as
/// "ema.<name>" for each of module.named_parameters() in that order, and its update count
/// in the metadata under "heed.ema.updates"; ValueError when it has not as many averages
/// as the module has parameters, of their shapes.
template <typename T>
void save_training_checkpoint(const Module<T>& module, const Adam<T>& optimizer, const std::string& path,
                              std::map<std::string, std::string> metadata = {},
                              const ExponentialMovingAverage* ema = nullptr) {
  constexpr const char* op = "save_training_checkpoint";
  detail::check_not_converted(module, op);
  const std::vector<std::string> names = detail::optimizer_parameter_names(module, optimizer, op);
  for (const char* key : {detail::kAdamStepsKey, detail::kEmaUpdatesKey})
    HEED_CHECK(metadata.count(key) == 0, ValueError, op, ": the metadata key '", key, "' is heed's");
  std::vector<detail::SafetensorsItem> items;
  std::vector<Tensor<T>> on_host;  // tensors on a device copied out, alive until written
  const auto add = [&](const std::string& name, const Tensor<T>& tensor) {
    on_host.push_back(detail::on_host(tensor));
    items.push_back(detail::safetensors_item(op, path, name, on_host.back()));
  };
  for (const auto& [name, parameter] : module.named_parameters()) add(name, parameter);
  std::string steps;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const AdamState<T>& state = optimizer.state()[i];
    steps += (i ? " " : "") + std::to_string(state.step);
    if (state.step == 0) continue;  // no moments yet
    add("optimizer.exp_avg." + names[i], state.exp_avg);
    add("optimizer.exp_avg_sq." + names[i], state.exp_avg_sq);
  }
  metadata[detail::kAdamStepsKey] = steps;
  if (ema && ema->started()) {
    const auto parameters = module.named_parameters();
    HEED_CHECK(ema->values().size() == parameters.size(), ValueError, op, ": the moving average has ",
               ema->values().size(), " tensors, the module ", parameters.size(), " parameters");
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const Tensor<float>& average = ema->values()[i];
      HEED_CHECK(average.shape() == parameters[i].second.shape(), ValueError, op, ": the moving average of '",
                 parameters[i].first, "' has shape ", to_string(average.shape()), ", the parameter ",
                 to_string(parameters[i].second.shape()));
      items.push_back(detail::safetensors_item(op, path, "ema." + parameters[i].first, average));
    }
    metadata[detail::kEmaUpdatesKey] = std::to_string(ema->updates());
  }
  detail::write_safetensors(op, path, std::move(items), metadata);
}

/// Loads what save_training_checkpoint saved into `module` and `optimizer` and returns
/// the file's metadata. The file must hold exactly the module's parameters and the
/// moments of the parameters whose step count is not 0, with the module's dtype and
/// shapes; anything else throws FileError naming the file and what differs, before the
/// module or the optimizer is touched. A file with a moving average ("heed.ema.updates")
/// must hold all of it; `ema`, when given, is set to it (and left as it was when the file
/// has none); without `ema` the average is read, checked and dropped.
template <typename T>
std::map<std::string, std::string> load_training_checkpoint(Module<T>& module, Adam<T>& optimizer,
                                                            const std::string& path,
                                                            ExponentialMovingAverage* ema = nullptr) {
  constexpr const char* op = "load_training_checkpoint";
  const std::vector<std::string> names = detail::optimizer_parameter_names(module, optimizer, op);
  detail::SafetensorsReader reader(op, path);
  const auto& metadata = reader.metadata();
  const auto found = metadata.find(detail::kAdamStepsKey);
  if (found == metadata.end())
    reader.fail("not a training checkpoint (no '", detail::kAdamStepsKey, "' in its metadata)");
  std::vector<std::int64_t> steps;
  std::istringstream in(found->second);
  for (std::int64_t step = 0; in >> step;) {
    if (step < 0) reader.fail("'", detail::kAdamStepsKey, "' holds a negative step count, ", step);
    steps.push_back(step);
  }
  if (!in.eof()) reader.fail("'", detail::kAdamStepsKey, "' is not a list of step counts");
  if (steps.size() != names.size())
    reader.fail("the optimizer state is for ", steps.size(), " parameters, the optimizer has ", names.size());

  index_t ema_updates = -1;  // -1: no moving average in the file
  if (const auto it = metadata.find(detail::kEmaUpdatesKey); it != metadata.end())
    if (!detail::parse_count(it->second, ema_updates))
      reader.fail("'", detail::kEmaUpdatesKey, "' is ", detail::quoted(it->second), ", not a count");

  auto parameters = module.named_parameters();
  std::map<std::string, Shape> shape_of;
  std::vector<std::pair<std::string, Shape>> expected;
  for (const auto& [name, parameter] : parameters) {
    expected.emplace_back(name, parameter.shape());
    shape_of.emplace(name, parameter.shape());
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (steps[i] == 0) continue;
    expected.emplace_back("optimizer.exp_avg." + names[i], shape_of.at(names[i]));
    expected.emplace_back("optimizer.exp_avg_sq." + names[i], shape_of.at(names[i]));
  }
  if (ema_updates >= 0)
    for (const auto& [name, parameter] : parameters) expected.emplace_back("ema." + name, parameter.shape());
  std::map<std::string, Tensor<T>> values =
      detail::read_checkpoint_tensors<T>(reader, expected, "parameters and optimizer state");

  std::vector<AdamState<T>> states(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    states[i].step = steps[i];
    if (steps[i] == 0) continue;
    const Device device = optimizer.params()[i].device();  // the moments live with their parameter
    states[i].exp_avg = values.at("optimizer.exp_avg." + names[i]).to(device);
    states[i].exp_avg_sq = values.at("optimizer.exp_avg_sq." + names[i]).to(device);
  }

  std::vector<Tensor<float>> averages;
  if (ema && ema_updates >= 0)
    for (const auto& [name, parameter] : parameters) {
      const Tensor<T>& read = values.at("ema." + name);
      Tensor<float> average = Tensor<float>::empty(read.shape());
      for (index_t j = 0; j < read.numel(); ++j) average.data()[j] = static_cast<float>(read.data()[j]);
      averages.push_back(std::move(average));
    }

  // Everything is read and checked: from here on nothing can fail.
  NoGradGuard no_grad;
  for (auto& [name, parameter] : parameters) parameter.copy_(values.at(name));
  optimizer.state() = std::move(states);
  if (ema && ema_updates >= 0) ema->set(std::move(averages), ema_updates);
  return reader.metadata();
}

// ---- where a training run stands: TrainState --------------------------------------------

/// Where a training run stands, as its training checkpoint keeps it to resume from
/// (train_translator's last.safetensors): the epochs and optimiser steps done, the
/// batches of the next epoch done where max_steps stopped it in mid-epoch, the best
/// validation metric so far (train_translator's BLEU), and the generators' states (the
/// loader's as it was when that epoch began, and default_generator(), which dropout
/// draws from). In the metadata under the keys train_translator has always written:
/// epochs_done, steps_done, epoch_batches_done (when not 0), best_bleu,
/// loader_generator and default_generator.
struct TrainState {
  index_t epochs_done = 0, steps_done = 0;
  index_t epoch_batches_done = 0;  // of epoch epochs_done + 1, where max_steps stopped it; 0: none
  double best_metric = -1.0;       // the best validation BLEU so far; -1: none yet
  std::string loader_generator, default_generator;

  /// The state as metadata: the counts in decimal, best_metric to 17 digits.
  std::map<std::string, std::string> to_metadata() const {
    std::map<std::string, std::string> out;
    out["loader_generator"] = loader_generator;
    out["default_generator"] = default_generator;
    out["epochs_done"] = std::to_string(epochs_done);
    out["steps_done"] = std::to_string(steps_done);
    if (epoch_batches_done > 0) out["epoch_batches_done"] = std::to_string(epoch_batches_done);
    std::ostringstream best;
    best.precision(17);
    best << best_metric;
    out["best_bleu"] = best.str();
    return out;
  }

  /// Reads the state of a checkpoint's metadata (read_safetensors_metadata's),
  /// changing nothing: each key present, the counts exact (parse_count), best_bleu a
  /// finite number in [-1, 100], the generators' states states. Throws FileError naming
  /// `path`, the key and its text.
  static TrainState from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    const auto field = [&](const char* key) -> const std::string& {
      const auto it = metadata.find(key);
      if (it == metadata.end())
        throw FileError(path + ": no '" + key +
                        "' in its metadata: not a train_translator last.safetensors (--resume takes the "
                        "training checkpoint, not best.safetensors)");
      return it->second;
    };
    const auto bad = [&](const char* key, const std::string& text, const std::string& what) {
      return FileError(path + ": metadata '" + key + "' is " + detail::quoted(text) + ", not " + what);
    };
    const auto count = [&](const char* key) {
      index_t value = 0;
      if (!detail::parse_count(field(key), value))
        throw bad(key, field(key),
                  "a count (decimal digits, at most " + std::to_string(std::numeric_limits<index_t>::max()) + ")");
      return value;
    };
    const auto state = [&](const char* key) {
      const std::string& text = field(key);
      try {
        Generator probe;
        probe.set_state(text);
      } catch (const ValueError& e) {
        throw bad(key, text, std::string("a generator's state: ") + e.what());
      }
      return text;
    };
    TrainState point;
    point.epochs_done = count("epochs_done");
    point.steps_done = count("steps_done");
    if (metadata.count("epoch_batches_done")) point.epoch_batches_done = count("epoch_batches_done");
    const std::string& bleu = field("best_bleu");
    char* end = nullptr;
    point.best_metric = std::strtod(bleu.c_str(), &end);
    // strtod also reads " 5", "inf", "nan" and hexadecimal: only what operator<< writes.
    const bool plain = !bleu.empty() && bleu.find_first_not_of("0123456789+-.eE") == std::string::npos;
    if (!plain || *end != '\0' || !(point.best_metric >= -1.0 && point.best_metric <= 100.0))
      throw bad("best_bleu", bleu, "a BLEU score from -1 (none yet) to 100");
    point.loader_generator = state("loader_generator");
    point.default_generator = state("default_generator");
    return point;
  }
};

/// What the resumed run allows.
struct TrainStateLimits {
  index_t epochs = 0;           // --epochs: the last epoch of the run
  index_t epoch_batches = 0;    // the batches of the epoch it resumes in (epochs_done + 1)
  index_t max_epoch_steps = 0;  // the most optimiser steps an epoch can take: one per training pair
};

/// Checks a training state against the run's limits: no more epochs done than --epochs
/// (refused, not taken as a finished run: the command line is likely not the one
/// meant), a batch of the epoch it resumes in, and as many steps as those epochs and
/// batches can have taken. Throws FileError naming `path`, the key and its value.
inline void check_train_state(const TrainState& p, const TrainStateLimits& limits, const std::string& path) {
  const auto refuse = [&](const char* key, index_t value, const std::string& why) {
    throw FileError(path + ": metadata '" + key + "' is " + std::to_string(value) + ", " + why);
  };
  if (limits.epochs < 0 || limits.epoch_batches < 1 || limits.max_epoch_steps < 1)
    throw ValueError(
        "check_train_state: the limits must be epochs >= 0, epoch_batches >= 1 and "
        "max_epoch_steps >= 1, got " +
        std::to_string(limits.epochs) + ", " + std::to_string(limits.epoch_batches) + " and " +
        std::to_string(limits.max_epoch_steps));
  for (const auto& [key, value] : {std::pair{"epochs_done", p.epochs_done}, std::pair{"steps_done", p.steps_done},
                                   std::pair{"epoch_batches_done", p.epoch_batches_done}})
    if (value < 0) refuse(key, value, "not a count");
  if (p.epochs_done > limits.epochs)
    refuse("epochs_done", p.epochs_done,
           "more than this run's --epochs " + std::to_string(limits.epochs) +
               ": refused, not taken as done (give --epochs " + std::to_string(p.epochs_done) + " or more)");
  if (p.epoch_batches_done > 0 && p.epochs_done == limits.epochs)
    refuse("epoch_batches_done", p.epoch_batches_done,
           "batches of epoch " + std::to_string(p.epochs_done + 1) + ", past this run's --epochs " +
               std::to_string(limits.epochs) + " (give --epochs " + std::to_string(p.epochs_done + 1) + " or more)");
  if (p.epoch_batches_done >= limits.epoch_batches)
    refuse("epoch_batches_done", p.epoch_batches_done,
           "but epoch " + std::to_string(p.epochs_done + 1) + " of this run has " +
               std::to_string(limits.epoch_batches) + " batches: it would be skipped, not resumed");
  // Each epoch takes a step at least, and at most one a batch, as does the epoch stopped
  // in its middle (the product saturates: epochs_done <= --epochs keeps it small anyway).
  constexpr index_t kMax = std::numeric_limits<index_t>::max();
  const index_t per_epoch = limits.max_epoch_steps;
  const index_t epochs = p.epochs_done > 0 && per_epoch > kMax / p.epochs_done ? kMax : p.epochs_done * per_epoch;
  const index_t most = epochs > kMax - p.epoch_batches_done ? kMax : epochs + p.epoch_batches_done;
  if (p.steps_done < p.epochs_done || p.steps_done > most)
    refuse("steps_done", p.steps_done,
           "but " + std::to_string(p.epochs_done) + " epochs and " + std::to_string(p.epoch_batches_done) +
               " batches take from " + std::to_string(p.epochs_done) + " to " + std::to_string(most) + " steps (" +
               std::to_string(per_epoch) + " an epoch at most: one a training pair)");
}

// ---- checkpoint averaging --------------------------------------------------------------

/// The element-wise mean of the parameters of several checkpoints (model checkpoints or
/// training checkpoints, such as train_translator's last epochs), saved to `out`
/// atomically as a model checkpoint: a training checkpoint's Adam moments
/// ("optimizer.*") and moving average ("ema.*") are dropped, and the first file's
/// metadata is kept without the training state (heed.adam.steps, heed.ema.updates and
/// TrainState's keys), with "heed.averaged_checkpoints" = the number of files, so that
/// load_checkpoint and Translator::load read it. Each value is summed in double in the
/// order of `files` and divided by their number, then rounded to the tensor's dtype
/// (F32, F64, F16 or BF16, the same in every file): the same files give the same bits.
/// An empty list or an empty `out` throws ValueError; files whose parameter names, dtypes
/// or shapes differ, or another dtype than those, throw FileError naming the file and
/// the tensor; in every case `out` is left as it was. `out` may be one of `files`.
inline void average_checkpoints(const std::vector<std::string>& files, const std::string& out) {
  constexpr const char* op = "average_checkpoints";
  HEED_CHECK(!files.empty(), ValueError, op, ": no checkpoints to average");
  HEED_CHECK(!out.empty(), ValueError, op, ": the output file name is empty");
  const auto dropped = [](const std::string& name) {
    return name.rfind("optimizer.", 0) == 0 || name.rfind("ema.", 0) == 0;
  };
  struct Sum {
    TensorRecord first;  // dtype and shape; its data replaced by the mean at the end
    std::vector<double> values;
  };
  std::map<std::string, Sum> sums;
  std::map<std::string, std::string> metadata;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string& path = files[f];
    SafetensorsFile file = read_safetensors(path);  // FileError naming the file when damaged
    std::vector<std::string> names;
    for (const auto& [name, record] : file.tensors)
      if (!dropped(name)) names.push_back(name);
    if (f == 0) {
      metadata = file.metadata;
      for (const char* key : {detail::kAdamStepsKey, detail::kEmaUpdatesKey, "epochs_done", "steps_done",
                              "epoch_batches_done", "best_bleu", "loader_generator", "default_generator"})
        metadata.erase(key);
      metadata["heed.averaged_checkpoints"] = std::to_string(files.size());
      if (names.empty()) throw FileError(detail::concat(op, ": ", path, ": no parameter tensors to average"));
    } else {
      for (const auto& [name, sum] : sums)
        if (file.tensors.count(name) == 0)
          throw FileError(detail::concat(op, ": ", path, ": has no tensor '", name, "', which ", files[0], " has"));
      if (names.size() != sums.size())
        for (const std::string& name : names)
          if (sums.count(name) == 0)
            throw FileError(
                detail::concat(op, ": ", path, ": has a tensor '", name, "', which ", files[0], " has not"));
    }
    for (const std::string& name : names) {
      TensorRecord& record = file.tensors.at(name);
      const bool floating = record.dtype == "F32" || record.dtype == "F64" || detail::is_half_dtype(record.dtype);
      if (!floating)
        throw FileError(detail::concat(op, ": ", path, ": tensor '", name, "' is ", record.dtype,
                                       ", not a floating-point parameter (F32, F64, F16, BF16)"));
      if (f == 0) {
        sums[name].first = TensorRecord{record.dtype, record.shape, {}};
        sums[name].values.assign(static_cast<std::size_t>(record.numel()), 0.0);
      }
      Sum& sum = sums.at(name);
      if (record.dtype != sum.first.dtype)
        throw FileError(detail::concat(op, ": ", path, ": tensor '", name, "' is ", record.dtype, ", ", files[0],
                                       "'s is ", sum.first.dtype));
      if (record.shape != sum.first.shape)
        throw FileError(detail::concat(op, ": ", path, ": tensor '", name, "' has shape ",
                                       detail::format_shape(record.shape), ", ", files[0], "'s ",
                                       detail::format_shape(sum.first.shape)));
      const auto add = [&sum](const auto& tensor) {
        for (std::size_t i = 0; i < sum.values.size(); ++i) sum.values[i] += static_cast<double>(tensor.data()[i]);
      };
      if (record.dtype == "F64")
        add(record.to_tensor<double>());
      else if (record.dtype == "F32")
        add(record.to_tensor<float>());
      else
        add(record.to_tensor<float>());  // F16 and BF16 are exact in float
    }
  }
  std::vector<std::pair<std::string, TensorRecord>> records;
  const double n = static_cast<double>(files.size());
  for (auto& [name, sum] : sums) {
    const Shape shape(sum.first.shape);
    if (sum.first.dtype == "F64") {
      Tensor<double> mean = Tensor<double>::empty(shape);
      for (std::size_t i = 0; i < sum.values.size(); ++i) mean.data()[i] = sum.values[i] / n;
      records.emplace_back(name, TensorRecord::from_tensor(mean));
    } else {
      Tensor<float> mean = Tensor<float>::empty(shape);
      for (std::size_t i = 0; i < sum.values.size(); ++i) mean.data()[i] = static_cast<float>(sum.values[i] / n);
      records.emplace_back(name, TensorRecord::from_tensor(mean, sum.first.dtype));
    }
    sum.values = {};
  }
  save_safetensors(out, records, metadata);  // atomic: a failure leaves `out` as it was
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
