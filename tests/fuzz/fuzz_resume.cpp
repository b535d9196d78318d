// Fuzz target: train_translator's --resume metadata (heed::TrainState::from_metadata and
// check_train_state, heed/io/training_checkpoint.hpp) on a metadata map of the input: one
// key=value a line. Lines "@epochs=N", "@epoch_batches=N" and "@max_epoch_steps=N" set
// the run's limits (default 10, 7 and 7). A heed::Error is the expected answer; a point
// that passes must be what the writer could have written: exact counts within the
// limits, a finite BLEU in [-1, 100], generator states that load.
#include "fuzz_common.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <heed/io/training_checkpoint.hpp>

namespace {

/// The text of a count without its leading zeros: what std::to_string gives back.
std::string canonical(const std::string& digits) {
  const std::size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> metadata;
  heed::TrainStateLimits limits{10, 7, 7};
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const std::size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    heed::index_t n = 0;
    const bool limit =
        heed::detail::parse_count(value, n) && n >= 1 && n <= (heed::index_t(1) << 20);  // the oracle's products fit
    if (key == "@epochs" && limit)
      limits.epochs = n;
    else if (key == "@epoch_batches" && limit)
      limits.epoch_batches = n;
    else if (key == "@max_epoch_steps" && limit)
      limits.max_epoch_steps = n;
    else
      metadata[key] = value;  // the last of a repeated key, as a JSON parser would not allow
  }

  heed::TrainState point;
  try {
    point = heed::TrainState::from_metadata(metadata, "fuzz.safetensors");
    heed::check_train_state(point, limits, "fuzz.safetensors");
  } catch (const heed::Error&) {
    return 0;
  }
  // Exact: each count's text is its value's (no "0.5", "1e3", "+1" or " 1").
  for (const auto& [key, value] :
       {std::pair{"epochs_done", point.epochs_done}, std::pair{"steps_done", point.steps_done},
        std::pair{"epoch_batches_done", point.epoch_batches_done}}) {
    const auto it = metadata.find(key);
    const std::string expected = it == metadata.end() ? "0" : canonical(it->second);
    if (std::to_string(value) != expected)
      heed_fuzz::fail(std::string(key) + " read as " + std::to_string(value) + " from '" + expected + "'");
  }
  if (point.epochs_done > limits.epochs || point.epoch_batches_done >= limits.epoch_batches ||
      (point.epoch_batches_done > 0 && point.epochs_done == limits.epochs))
    heed_fuzz::fail("a resume point past the run's limits passed");
  if (point.steps_done < point.epochs_done ||
      point.steps_done > point.epochs_done * limits.max_epoch_steps + point.epoch_batches_done)
    heed_fuzz::fail("steps_done " + std::to_string(point.steps_done) + " passed, out of its epochs' range");
  if (!std::isfinite(point.best_metric) || point.best_metric < -1.0 || point.best_metric > 100.0)
    heed_fuzz::fail("best_bleu " + std::to_string(point.best_metric) + " passed");
  try {
    heed::Generator probe;
    probe.set_state(point.loader_generator);
    probe.set_state(point.default_generator);
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("a generator state that passed does not load: ") + e.what());
  }
  return 0;
}
