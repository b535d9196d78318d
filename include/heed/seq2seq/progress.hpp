// heed/seq2seq/progress.hpp — observers of train_seq2seq's epochs: a progress report
// and the loss curve (SVG and CSV). The training loop itself reports nothing and draws
// nothing; a program attaches what it wants through TrainOptions::on_epoch:
//
//   heed::ProgressReport progress;                    // stderr: a bar with the ETA on a
//   heed::LossCurve curve("loss.svg", "loss.csv");    // terminal, else a line per tenth
//   options.on_epoch = [&](const heed::EpochStats& s) { progress(s); curve(s); };
//
// LossCurve writes its files after the last epoch (or on save()), atomically as every
// heed file: the CSV has a header and one line per epoch, epoch,loss,tokens_per_second.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "heed/detail/files.hpp"
#include "heed/detail/inline.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/viz/plot.hpp"

#if __has_include(<unistd.h>)
#include <unistd.h>
#define HEED_HAVE_ISATTY 1
#endif

namespace heed {
namespace detail {

inline bool stderr_is_terminal() {
#ifdef HEED_HAVE_ISATTY
  return isatty(fileno(stderr)) != 0;
#else
  return false;
#endif
}

inline std::string format_seconds(double s) {
  char text[32];
  if (s < 60)
    std::snprintf(text, sizeof text, "%.1f s", s);
  else
    std::snprintf(text, sizeof text, "%d min %02d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return text;
}

}  // namespace detail

/// Reports training progress: on a terminal, one line redrawn with a bar and the ETA;
/// elsewhere (a log file), a plain line per tenth of the run and one for the last epoch.
class ProgressReport {
 public:
  explicit ProgressReport(std::ostream& out = std::cerr, bool terminal = detail::stderr_is_terminal())
      : out_(&out), terminal_(terminal) {}

  void operator()(const EpochStats& stats) const;

 private:
  std::ostream* out_;
  bool terminal_;
};

namespace detail {
inline void report_progress_on_stderr(const EpochStats& stats) { ProgressReport{std::cerr}(stats); }
}  // namespace detail

/// Records each epoch's loss and writes the curve as SVG and as CSV (either path may be
/// empty) after the last epoch, or when save() is called.
class LossCurve {
 public:
  explicit LossCurve(std::string svg_path, std::string csv_path = "")
      : svg_path_(std::move(svg_path)), csv_path_(std::move(csv_path)) {}

  void operator()(const EpochStats& stats);

  const std::vector<double>& losses() const { return losses_; }

  void save() const;

 private:
  std::string svg_path_, csv_path_;
  std::vector<double> losses_, tokens_per_second_;
};

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE void ProgressReport::operator()(const EpochStats& stats) const {
  char line[160];
  // From this run's pace: a resumed run's elapsed time covers its own epochs only.
  const double eta = stats.elapsed_seconds /
                     static_cast<double>(std::max<index_t>(stats.epoch - stats.epochs_before, 1)) *
                     static_cast<double>(stats.num_epochs - stats.epoch);
  if (terminal_) {
    const int width = 24, filled = static_cast<int>(width * stats.epoch / std::max<index_t>(stats.num_epochs, 1));
    std::snprintf(line, sizeof line, "\r  epoch %lld/%lld [%s%s] loss %.3f, %.0f tokens/s, ETA %s   ",
                  static_cast<long long>(stats.epoch), static_cast<long long>(stats.num_epochs),
                  std::string(static_cast<std::size_t>(filled), '#').c_str(),
                  std::string(static_cast<std::size_t>(width - filled), '.').c_str(), stats.loss,
                  stats.tokens_per_second, detail::format_seconds(eta).c_str());
    *out_ << line << (stats.epoch == stats.num_epochs ? "\n" : "") << std::flush;
    return;
  }
  const index_t every = std::max<index_t>(stats.num_epochs / 10, 1);
  if (stats.epoch % every != 0 && stats.epoch != stats.num_epochs) return;
  std::snprintf(line, sizeof line, "  epoch %lld/%lld: loss %.3f, %.0f tokens/s, %s elapsed, ETA %s\n",
                static_cast<long long>(stats.epoch), static_cast<long long>(stats.num_epochs), stats.loss,
                stats.tokens_per_second, detail::format_seconds(stats.elapsed_seconds).c_str(),
                detail::format_seconds(eta).c_str());
  *out_ << line << std::flush;
}

HEED_INLINE void LossCurve::operator()(const EpochStats& stats) {
  losses_.push_back(stats.loss);
  tokens_per_second_.push_back(stats.tokens_per_second);
  if (stats.epoch == stats.num_epochs) save();
}

HEED_INLINE void LossCurve::save() const {
  if (!csv_path_.empty()) {
    std::ostringstream csv;
    csv << "epoch,loss,tokens_per_second\n";
    for (std::size_t i = 0; i < losses_.size(); ++i)
      csv << i + 1 << ',' << losses_[i] << ',' << tokens_per_second_[i] << '\n';
    const std::string text = csv.str();
    detail::save_atomically("LossCurve", csv_path_,
                            [&](const detail::SaveSink& out) { out.write(text.data(), text.size()); });
  }
  if (!svg_path_.empty() && !losses_.empty()) {
    std::vector<double> epochs;
    for (std::size_t i = 0; i < losses_.size(); ++i) epochs.push_back(static_cast<double>(i + 1));
    Plot plot;
    plot.line(epochs, losses_, "", "-").xlabel("epoch").ylabel("loss");
    plot.save(svg_path_);
  }
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed

#include "heed/detail/header_end.hpp"
