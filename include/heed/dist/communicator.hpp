// heed/dist/communicator.hpp — what data-parallel training needs from the processes it
// runs on: who am I, how many are we, sum a buffer across us, copy one's buffer to all,
// wait for all, and end all of us at once.
//
//   heed::dist::LocalCommunicator one;        // a single process: every call is a no-op
//   heed::dist::MpiCommunicator world;        // heed/dist/mpi.hpp: the processes mpiexec started
//   options.communicator = &world;            // train_seq2seq on every rank
//
// The sums are deterministic: element i of the result is ((x_0 + x_1) + x_2) + ... over
// the ranks in rank order, on every rank, whatever the timing, so that N processes give
// the bits one process gives when it adds the same N parts one after another
// (heed/optim/micro_batches.hpp). An implementation for GPUs (NCCL) would take device
// pointers behind the same calls; see docs/distributed.md.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "heed/core/error.hpp"

namespace heed {
namespace dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This process's number, 0 to size() - 1; rank 0 logs, plots and saves.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// data[0, n) becomes the sum over the ranks of their data[0, n), added in rank order
  /// (see above); every rank passes the same n.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;

  /// Every rank's bytes[0, n) become rank `root`'s; every rank passes the same n.
  virtual void broadcast_bytes(void* bytes, std::size_t n, int root) = 0;
  void broadcast(float* data, std::size_t n, int root = 0) { broadcast_bytes(data, n * sizeof(float), root); }
  void broadcast(double* data, std::size_t n, int root = 0) { broadcast_bytes(data, n * sizeof(double), root); }
  /// Every rank's text becomes rank `root`'s (of any length).
  void broadcast(std::string& text, int root = 0) {
    double length = static_cast<double>(text.size());  // exact below 2^53
    broadcast(&length, 1, root);
    text.resize(static_cast<std::size_t>(length));
    if (!text.empty()) broadcast_bytes(text.data(), text.size(), root);
  }

  /// Returns once every rank has called it.
  virtual void barrier() = 0;

  /// Ends every rank's process, after writing `message` to this one's standard error:
  /// what a rank does with an exception the others cannot know of, instead of leaving
  /// them waiting for it in the next sum.
  [[noreturn]] virtual void abort(const std::string& message) = 0;

 protected:
  void check_root(int root, const char* op) const {
    HEED_CHECK(root >= 0 && root < size(), ValueError, op, ": root ", root, " is not a rank of ", size());
  }
};

/// One process: rank 0 of 1. The sums and broadcasts leave the data as it is.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void broadcast_bytes(void*, std::size_t, int root) override { check_root(root, "LocalCommunicator::broadcast"); }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& message) override {
    std::fprintf(stderr, "heed: %s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
  }
};

}  // namespace dist
}  // namespace heed
