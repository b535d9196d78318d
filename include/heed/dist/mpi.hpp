// heed/dist/mpi.hpp — the Communicator of processes started by mpiexec (Open MPI, MPICH).
// Needs <mpi.h>: link heed::mpi (CMake -DHEED_WITH_MPI=ON; Debian: libopenmpi-dev).
//
//   int main(int argc, char** argv) {
//     heed::dist::MpiSession mpi(&argc, &argv);   // MPI_Init ... MPI_Finalize
//     heed::dist::MpiCommunicator world;           // MPI_COMM_WORLD, duplicated
//     heed::TrainOptions options;
//     options.communicator = &world;
//     ...
//   }
//   $ mpiexec -n 2 ./train          # or --hostfile hosts: docs/distributed.md
//
// allreduce_sum is a reduce-scatter then an all-gather (MPI_Alltoallv, MPI_Allgatherv):
// rank r adds chunk r of every rank's buffer in rank order, then every rank gathers the
// chunks. That sends what a ring all-reduce sends (2 (N−1)/N of the buffer per rank) and,
// unlike MPI_Allreduce, fixes the order of the additions (MPI only promises an order for
// two ranks), so the sums do not depend on N's topology or on timing.
#pragma once

// The C API only: MPI's deprecated C++ bindings do not compile warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/dist/communicator.hpp"

namespace heed {
namespace dist {
namespace detail {

inline void check_mpi(int code, const char* call, int rank) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CommunicationError(std::string(call) + " on rank " + std::to_string(rank) + ": " +
                           std::string(text, static_cast<std::size_t>(std::max(length, 0))));
}

template <typename T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

}  // namespace detail

/// MPI_Init_thread on construction (unless MPI is already initialised) and
/// MPI_Finalize on destruction (if it initialised). heed calls MPI from the thread that
/// trains only; its OpenMP threads never do (MPI_THREAD_FUNNELED).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    detail::check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread", -1);
    owns_ = true;
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

/// The processes of an MPI communicator (MPI_COMM_WORLD unless given), through a
/// duplicate of it, so that heed's messages never match the program's own. Errors come
/// back as CommunicationError naming the call and the rank. MPI must be initialised
/// (MpiSession) and this object destroyed before MPI_Finalize. share_memory = false
/// sums through MPI's messages even on one machine (what several machines do).
class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, bool share_memory = true) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    HEED_CHECK(initialized, CommunicationError,
               "MpiCommunicator: MPI is not initialised (construct an MpiSession first)");
    detail::check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", -1);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    if (share_memory) share_memory_if_one_node();
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (window_ != MPI_WIN_NULL) {
      MPI_Win_unlock_all(window_);
      MPI_Win_free(&window_);
    }
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const { return comm_; }

  void allreduce_sum(float* data, std::size_t n) override { allreduce_sum_in_rank_order(data, n, float_scratch_); }
  void allreduce_sum(double* data, std::size_t n) override { allreduce_sum_in_rank_order(data, n, double_scratch_); }
  /// Whether the sums go through memory the ranks share (all on one machine) rather
  /// than through MPI's messages.
  bool shares_memory() const { return window_ != MPI_WIN_NULL; }

  void broadcast_bytes(void* bytes, std::size_t n, int root) override {
    check_root(root, "MpiCommunicator::broadcast");
    auto* at = static_cast<char*>(bytes);
    for (std::size_t done = 0; done < n;) {  // MPI counts are ints
      const int count = static_cast<int>(std::min<std::size_t>(n - done, INT_MAX));
      detail::check_mpi(MPI_Bcast(at + done, count, MPI_BYTE, root, comm_), "MPI_Bcast", rank_);
      done += static_cast<std::size_t>(count);
    }
  }

  void barrier() override { detail::check_mpi(MPI_Barrier(comm_), "MPI_Barrier", rank_); }

  [[noreturn]] void abort(const std::string& message) override {
    std::fprintf(stderr, "heed: rank %d of %d: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(comm_, 1);
    std::abort();  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  // A piece of at most kPiece elements at a time: every chunk's count fits an int.
  static constexpr std::size_t kPiece = std::size_t(1) << 28;

  // One machine: a window of shared memory, kSharedBytes per rank, through which a sum
  // costs a copy in, the additions and a copy out, where MPI's messages (MPI_Alltoallv
  // and MPI_Allgatherv) copy each chunk twice more. Pieces of 256 KiB stay in the caches
  // between the copies: 4.2M floats on 2 ranks of this machine took 2.7-3.5 ms, against
  // 6.4 ms through MPI's messages and 7.4-9.8 ms for MPI_Allreduce (4 MiB pieces: 4.9 ms).
  static constexpr std::size_t kSharedBytes = std::size_t(256) << 10;

  void share_memory_if_one_node() {
    if (size_ == 1) return;
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) != MPI_SUCCESS) return;
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (node_size != size_) return;  // several machines: MPI's messages
    void* base = nullptr;
    if (MPI_Win_allocate_shared(static_cast<MPI_Aint>(kSharedBytes), 1, MPI_INFO_NULL, comm_, &base, &window_) !=
        MPI_SUCCESS) {
      window_ = MPI_WIN_NULL;
      return;
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, window_);
    segments_.resize(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      MPI_Aint bytes = 0;
      int unit = 0;
      MPI_Win_shared_query(window_, r, &bytes, &unit, &segments_[static_cast<std::size_t>(r)]);
    }
  }

  // Chunk c of a piece, [piece·c/N, piece·(c+1)/N), is summed by rank c, on either path.
  std::size_t chunk_start(std::size_t piece, std::size_t c) const {
    return piece * c / static_cast<std::size_t>(size_);
  }

  // Every rank's writes to the window before it are seen by every rank after it.
  void window_barrier() {
    MPI_Win_sync(window_);
    detail::check_mpi(MPI_Barrier(comm_), "MPI_Barrier", rank_);
    MPI_Win_sync(window_);
  }

  template <typename T>
  void allreduce_sum_in_rank_order(T* data, std::size_t n, std::vector<T>& scratch) {
    if (size_ == 1) return;
    if (window_ != MPI_WIN_NULL) {
      sum_through_shared_memory(data, n);
      return;
    }
    const auto ranks = static_cast<std::size_t>(size_);
    std::vector<int> chunk_counts(ranks), chunk_starts(ranks), mine(ranks), mine_starts(ranks);
    for (std::size_t begin = 0; begin < n; begin += kPiece) {
      const std::size_t piece = std::min(kPiece, n - begin);
      T* at = data + begin;
      for (std::size_t c = 0; c < ranks; ++c) {
        chunk_starts[c] = static_cast<int>(chunk_start(piece, c));
        chunk_counts[c] = static_cast<int>(chunk_start(piece, c + 1)) - chunk_starts[c];
      }
      const auto me = static_cast<std::size_t>(rank_);
      const int my_count = chunk_counts[me];
      for (std::size_t r = 0; r < ranks; ++r) {
        mine[r] = my_count;
        mine_starts[r] = static_cast<int>(r) * my_count;
      }
      scratch.resize(ranks * static_cast<std::size_t>(my_count));
      detail::check_mpi(MPI_Alltoallv(at, chunk_counts.data(), chunk_starts.data(), detail::mpi_type<T>(),
                                      scratch.data(), mine.data(), mine_starts.data(), detail::mpi_type<T>(), comm_),
                        "MPI_Alltoallv", rank_);
      T* sum = at + chunk_starts[me];
      const auto count = static_cast<std::size_t>(my_count);
      std::copy(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(count), sum);
      for (std::size_t r = 1; r < ranks; ++r) {
        const T* part = scratch.data() + r * count;
        for (std::size_t i = 0; i < count; ++i) sum[i] += part[i];
      }
      detail::check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, at, chunk_counts.data(), chunk_starts.data(),
                                       detail::mpi_type<T>(), comm_),
                        "MPI_Allgatherv", rank_);
    }
  }

  // Each rank copies its piece into its own segment; rank c adds chunk c of every
  // segment in rank order and writes the sum over chunk c of its own segment (which no
  // other rank reads in that phase); then every rank copies chunk c from rank c's segment.
  template <typename T>
  void sum_through_shared_memory(T* data, std::size_t n) {
    const std::size_t capacity = kSharedBytes / sizeof(T);
    const auto ranks = static_cast<std::size_t>(size_), me = static_cast<std::size_t>(rank_);
    T* mine = static_cast<T*>(segments_[me]);
    for (std::size_t begin = 0; begin < n; begin += capacity) {
      const std::size_t piece = std::min(capacity, n - begin);
      T* at = data + begin;
      std::copy(at, at + piece, mine);
      window_barrier();
      for (std::size_t i = chunk_start(piece, me), last = chunk_start(piece, me + 1); i < last; ++i) {
        T sum = static_cast<const T*>(segments_[0])[i];
        for (std::size_t r = 1; r < ranks; ++r) sum += static_cast<const T*>(segments_[r])[i];
        mine[i] = sum;
      }
      window_barrier();
      for (std::size_t c = 0; c < ranks; ++c) {
        const T* sums = static_cast<const T*>(segments_[c]);
        std::copy(sums + chunk_start(piece, c), sums + chunk_start(piece, c + 1), at + chunk_start(piece, c));
      }
      window_barrier();  // before the next piece overwrites what the others copy from
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<void*> segments_;  // each rank's segment of the window, as this process sees it
  int rank_ = 0, size_ = 1;
  std::vector<float> float_scratch_;
  std::vector<double> double_scratch_;
};

}  // namespace dist
}  // namespace heed
