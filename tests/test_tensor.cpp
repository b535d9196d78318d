// Tensor<T>: element access, conversions, printing as PyTorch's repr, the buffer cache
// and devices.
#include "tensor_common.hpp"

#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <sys/resource.h>  // getrusage: the pages a process has faulted in
#endif

// ---- element access ---------------------------------------------------------------------

TEST_CASE("at reads and writes elements, with negative indices from the end", "[tensor]") {
  auto x = iota234();
  CHECK(x.at({1, 2, 3}) == 23.f);
  CHECK(x.at({-1, -1, -1}) == 23.f);
  CHECK(x.at({0, -3, 1}) == 1.f);
  CHECK(x.at({-2, 1, -4}) == 4.f);
  x.at({-1, 0, 0}) = 100.f;
  CHECK(x.at({1, 0, 0}) == 100.f);
  CHECK(x.to_vector()[12] == 100.f);
  x.at({0, 0, 0}) += 0.5f;
  CHECK(x.data()[0] == 0.5f);

  auto s = heed::scalar_tensor(2.0);
  CHECK(s.at({}) == 2.0);
  s.at({}) = 3.0;
  CHECK(s.item() == 3.0);
  CHECK(heed::ones({1, 1, 1}).item() == 1.f);
}

TEST_CASE("to_vector copies and to<U> converts the element type", "[tensor]") {
  auto x = heed::tensor<float>({{1.5f, -2.7f}, {3.f, 0.25f}});
  auto v = x.to_vector();
  CHECK(v == std::vector<float>{1.5f, -2.7f, 3.f, 0.25f});
  v[0] = 9.f;
  CHECK(x.at({0, 0}) == 1.5f);

  const auto d = x.to<double>();
  STATIC_REQUIRE(std::is_same_v<decltype(d), const heed::Tensor<double>>);
  CHECK(d.shape() == Shape{2, 2});
  check_values(d, {1.5, -2.7, 3.0, 0.25});
  CHECK(d.at({0, 1}) == static_cast<double>(-2.7f));

  const auto i = x.to<std::int64_t>();  // truncation toward zero, as PyTorch
  CHECK(i.to_vector() == std::vector<std::int64_t>{1, -2, 3, 0});
  CHECK(i.to<float>().to_vector() == std::vector<float>{1, -2, 3, 0});
  const auto b = heed::tensor<std::int64_t>({0, 3, -1}).to<bool>();
  CHECK(b.to_vector() == std::vector<bool>{false, true, true});
}

TEST_CASE("bool and int64 tensors reshape and permute", "[tensor]") {
  const heed::Tensor<bool> b({true, false, true, false, true, true}, {2, 3});
  const auto bt = b.permute({1, 0});
  CHECK(bt.shape() == Shape{3, 2});
  CHECK(bt.to_vector() == std::vector<bool>{true, false, false, true, true, true});
  CHECK(b.reshape({3, -1}).shape() == Shape{3, 2});
  CHECK(b.reshape({3, -1}).shares_storage(b));
  CHECK(b.transpose(0, 1).at({2, 1}) == true);

  const auto i = heed::arange<std::int64_t>(0, 6).reshape({2, 3});
  CHECK(i.shape() == Shape{2, 3});
  CHECK(i.permute({1, 0}).to_vector() == std::vector<std::int64_t>{0, 3, 1, 4, 2, 5});
  CHECK(i.select(1, -1).to_vector() == std::vector<std::int64_t>{2, 5});
  CHECK(i.repeat({1, 2}).to_vector() == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  CHECK(heed::cat({i, i}, 0).shape() == Shape{4, 3});
}

// ---- printing ---------------------------------------------------------------------------

TEST_CASE("tensors print exactly as PyTorch's repr", "[tensor]") {
  SECTION("whole-valued floats") { CHECK(repr(heed::tensor<float>({1, 2, 3})) == "tensor([1., 2., 3.])"); }
  SECTION("a matrix with four decimals") {
    CHECK(repr(heed::tensor<float>({{0.1f, 0.2f}, {0.3f, 0.4f}})) ==
          "tensor([[0.1000, 0.2000],\n"
          "        [0.3000, 0.4000]])");
  }
  SECTION("negative values pad to a common width") {
    CHECK(repr(heed::tensor<float>({-1.5f, 2.25f, 10.f})) == "tensor([-1.5000,  2.2500, 10.0000])");
    CHECK(repr(heed::tensor<float>({-1, 0, 10})) == "tensor([-1.,  0., 10.])");
  }
  SECTION("rank 0") {
    CHECK(repr(heed::scalar_tensor(3.5f)) == "tensor(3.5000)");
    CHECK(repr(heed::scalar_tensor(2.f)) == "tensor(2.)");
  }
  SECTION("float64 names its dtype") {
    CHECK(repr(heed::tensor<double>({1.5, 2})) == "tensor([1.5000, 2.0000], dtype=float64)");
  }
  SECTION("a marked leaf and a recorded result") {
    auto x = heed::tensor<float>({1, 2});
    x.requires_grad_();
    CHECK(repr(x) == "tensor([1., 2.], requires_grad=True)");
    CHECK(repr(x * 2.0) == "tensor([2., 4.], grad_fn=<MulBackward>)");
    auto w = heed::tensor<double>({0.5});
    w.requires_grad_();
    CHECK(repr(w) == "tensor([0.5000], dtype=float64, requires_grad=True)");
  }
  SECTION("bool") { CHECK(repr(heed::tensor<bool>({true, false})) == "tensor([ True, False])"); }
  SECTION("int64") {
    CHECK(repr(heed::tensor<std::int64_t>({1, 2, 3})) == "tensor([1, 2, 3])");
    CHECK(repr(heed::tensor<std::int64_t>({{-10, 2}, {3, 4}})) ==
          "tensor([[-10,   2],\n"
          "        [  3,   4]])");
  }
  SECTION("scientific notation when magnitudes span more than 1000x") {
    CHECK(repr(heed::tensor<float>({1e-5f, 1.f})) == "tensor([1.0000e-05, 1.0000e+00])");
    CHECK(repr(heed::tensor<float>({1.f, 1e4f})) == "tensor([1.0000e+00, 1.0000e+04])");
    CHECK(repr(heed::tensor<float>({1.f, 1000.f})) == "tensor([   1., 1000.])");
  }
  SECTION("a 3-D tensor separates its blocks by a blank line") {
    CHECK(repr(heed::arange(8.f).reshape({2, 2, 2})) ==
          "tensor([[[0., 1.],\n"
          "         [2., 3.]],\n"
          "\n"
          "        [[4., 5.],\n"
          "         [6., 7.]]])");
  }
  SECTION("long rows wrap at 80 columns") {
    CHECK(repr(heed::ones({20})) ==
          "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.,\n"
          "        1., 1.])");
  }
  SECTION("more than 1000 elements are summarised with 3 edge items") {
    CHECK(repr(heed::arange(2000.f)) ==
          "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
          "        1.9990e+03])");
    CHECK(repr(heed::arange<std::int64_t>(0, 2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
    CHECK(repr(heed::ones({1001, 2})) ==
          "tensor([[1., 1.],\n"
          "        [1., 1.],\n"
          "        [1., 1.],\n"
          "        ...,\n"
          "        [1., 1.],\n"
          "        [1., 1.],\n"
          "        [1., 1.]])");
  }
  SECTION("non-finite values do not widen the columns") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(repr(heed::tensor<float>({1, inf})) == "tensor([1., inf])");
    CHECK(repr(heed::tensor<float>({-inf, 2})) == "tensor([-inf, 2.])");
    CHECK(repr(heed::tensor<float>({0, nan})) == "tensor([0., nan])");
    CHECK(repr(heed::tensor<float>({1.5f, nan})) == "tensor([1.5000,    nan])");
  }
  SECTION("all zeros have width 1, so 24 fit on a line") {
    std::string first, second;
    for (int i = 0; i < 24; ++i) first += i ? ", 0." : "0.";
    for (int i = 0; i < 6; ++i) second += i ? ", 0." : "0.";
    CHECK(repr(heed::zeros({30})) == "tensor([" + first + ",\n        " + second + "])");
  }
  SECTION("a suffix that would pass 80 columns goes on its own line") {
    auto x = heed::tensor<float>({-1.1258f, -1.1524f, -0.2506f, -0.4339f, 0.8487f, 0.6920f, -0.3160f, -2.1152f});
    x.requires_grad_();
    CHECK(repr(x) ==
          "tensor([-1.1258, -1.1524, -0.2506, -0.4339,  0.8487,  0.6920, -0.3160, -2.1152],\n"
          "       requires_grad=True)");
    auto m = heed::tensor<float>({{1, 2}, {3, 4}});
    m.requires_grad_();
    CHECK(repr(m) ==
          "tensor([[1., 2.],\n"
          "        [3., 4.]], requires_grad=True)");
    auto d = heed::full<double>({5}, 0.5);
    d.requires_grad_();
    CHECK(repr(d) ==
          "tensor([0.5000, 0.5000, 0.5000, 0.5000, 0.5000], dtype=float64,\n"
          "       requires_grad=True)");
  }
  SECTION("empty tensors") {
    CHECK(repr(heed::zeros<std::int64_t>({0})) == "tensor([], dtype=int64)");
    CHECK(repr(heed::zeros<bool>({0, 3})) == "tensor([], size=(0, 3), dtype=bool)");
    CHECK(repr(heed::zeros({0})) == "tensor([])");
    CHECK(repr(heed::zeros({2, 0})) == "tensor([], size=(2, 0))");
    CHECK(repr(heed::zeros<double>({0})) == "tensor([], dtype=float64)");
    CHECK(repr(heed::Tensor<float>()) == "tensor(undefined)");
  }
}

TEST_CASE("buffers are reused through the cache, which can be bounded and emptied", "[tensor]") {
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);
  const index_t n = index_t(1) << 16;  // 256 KiB of floats: above the cache's threshold
  const float* first = nullptr;
  {
    auto a = heed::zeros({n});
    first = a.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == static_cast<std::size_t>(n) * sizeof(float));
  {
    auto b = heed::ones({n});  // the same size takes the idle buffer back
    CHECK(b.data() == first);
    CHECK(heed::buffer_cache_idle_bytes() == 0);
    CHECK(b.at({n - 1}) == 1.f);
  }
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);

  heed::set_buffer_cache_limit(0);  // off: freed buffers go straight back to the system
  { auto c = heed::zeros({n}); }
  CHECK(heed::buffer_cache_idle_bytes() == 0);
  heed::set_buffer_cache_limit(std::size_t(1) << 30);

  const float* small_first = nullptr;
  {
    auto small = heed::zeros({16});  // small buffers are kept by exact size (multiples of 64 bytes)
    small_first = small.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == 64);
  {
    auto other_size = heed::zeros({17});  // 68 bytes: the 128-byte list, empty
    CHECK(other_size.data() != small_first);
    auto same_size = heed::ones({16});
    CHECK(same_size.data() == small_first);
    CHECK(heed::buffer_cache_idle_bytes() == 0);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 64 + 128);
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);

  // Above 1 KiB small sizes round up to eight classes per octave: 1200 and 1240 bytes
  // are both served at 1280, 1300 bytes is the next class (1408).
  const float* class_first = nullptr;
  {
    auto a = heed::zeros({300});
    class_first = a.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == 1280);
  {
    auto b = heed::zeros({310});
    CHECK(b.data() == class_first);
    auto c = heed::zeros({325});
    CHECK(c.data() != class_first);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 1280 + 1408);
  heed::empty_buffer_cache();
}

TEST_CASE("the buffer cache reuses a resident buffer up to twice the size and keeps idle ones on a miss", "[tensor]") {
  heed::empty_buffer_cache();
  const index_t n = index_t(1) << 16;  // 256 KiB of floats
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  { auto a = heed::zeros({n}); }
  REQUIRE(heed::buffer_cache_idle_bytes() == bytes);
  {
    auto smaller = heed::zeros({n * 2 / 3});  // fits in the idle buffer: no fresh memory
    CHECK(heed::buffer_cache_idle_bytes() == 0);
  }
  REQUIRE(heed::buffer_cache_idle_bytes() == bytes);  // returned at its full size
  {
    auto larger = heed::zeros({n * 4});  // no idle buffer fits: fresh memory, the idle one stays
    CHECK(heed::buffer_cache_idle_bytes() == bytes);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 5 * bytes);
  {
    auto quarter = heed::zeros({n / 4});  // more than twice too small for either: a miss
    CHECK(heed::buffer_cache_idle_bytes() == 5 * bytes);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 5 * bytes + bytes / 4);
  // A step that needs the same sizes again allocates nothing.
  {
    auto again = heed::zeros({n * 4});
    auto and_again = heed::zeros({n});
    CHECK(heed::buffer_cache_idle_bytes() == bytes / 4);
  }
  heed::empty_buffer_cache();
}

TEST_CASE("buffer_usage counts the bytes in tensors and held idle, and their peaks", "[tensor]") {
  heed::empty_buffer_cache();
  const std::size_t bytes = std::size_t(1) << 18;  // 256 KiB of floats
  const index_t n = static_cast<index_t>(bytes / sizeof(float));
  const heed::BufferUsage before = heed::buffer_usage();
  CHECK(before.idle == 0);
  heed::reset_buffer_peaks();
  CHECK(heed::buffer_usage().peak_in_use == before.in_use);
  CHECK(heed::buffer_usage().peak_held == before.in_use);
  {
    auto a = heed::zeros({n});
    auto b = heed::zeros({2 * n});
    const heed::BufferUsage during = heed::buffer_usage();
    CHECK(during.in_use == before.in_use + 3 * bytes);
    CHECK(during.peak_in_use == during.in_use);
  }
  heed::BufferUsage after = heed::buffer_usage();
  CHECK(after.in_use == before.in_use);
  CHECK(after.idle == 3 * bytes);  // kept for reuse
  CHECK(after.peak_in_use == before.in_use + 3 * bytes);
  CHECK(after.peak_held == before.in_use + 3 * bytes);
  {
    auto c = heed::zeros({2 * n});  // served from the idle buffers: nothing more held
    CHECK(heed::buffer_usage().peak_held == before.in_use + 3 * bytes);
  }
  heed::reset_buffer_peaks();
  after = heed::buffer_usage();
  CHECK(after.peak_in_use == before.in_use);
  CHECK(after.peak_held == before.in_use + 3 * bytes);
  heed::empty_buffer_cache();
  CHECK(heed::buffer_usage().idle == 0);
}

TEST_CASE("a large request the idle buffers cannot serve returns as many smaller idle bytes to the system",
          "[tensor]") {
  heed::empty_buffer_cache();
  const index_t n = 51200;  // 200 KiB of floats
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  {
    auto a = heed::zeros({n});
    auto b = heed::zeros({n});
    auto c = heed::zeros({n});
    auto big = heed::zeros({5 * n});  // too large to serve 2n (more than twice): kept
  }
  CHECK(heed::buffer_usage().idle == 8 * bytes);
  {
    auto d = heed::zeros({2 * n});  // a miss: two of the 200 KiB buffers go, the third stays
    CHECK(heed::buffer_usage().idle == 6 * bytes);
  }
  CHECK(heed::buffer_usage().idle == 8 * bytes);  // d's buffer joins the idle ones
  {
    auto e = heed::zeros({n});  // served by the remaining one: no release
    auto f = heed::zeros({2 * n});
    CHECK(heed::buffer_usage().idle == 5 * bytes);
  }
  heed::empty_buffer_cache();
  { auto a = heed::zeros({n}); }
  {
    auto g = heed::zeros({3 * n});  // fewer idle bytes than asked: nothing released
    CHECK(heed::buffer_usage().idle == bytes);
  }
  heed::empty_buffer_cache();
}

/// Whether a sanitizer's allocator stands in for the C library's (it takes no mallopt).
constexpr bool kSanitizedAllocator =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

TEST_CASE("retain_freed_memory: memory freed and wanted again is not faulted in anew", "[tensor]") {
  const bool retained = heed::retain_freed_memory();
#if defined(__GLIBC__)
  CHECK(retained == !kSanitizedAllocator);
  if (!retained) return;  // the sanitizers' allocator, which keeps its own rules
  const auto pages_faulted = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
  };
  // 24 MiB written, freed and taken again: glibc's malloc would have given it back to
  // the system (unmapped, or trimmed from its heap's top) and faulted in 6,144 pages anew.
  constexpr std::size_t kBytes = std::size_t(24) << 20;
  char* first = static_cast<char*>(std::malloc(kBytes));
  REQUIRE(first != nullptr);
  std::memset(first, 1, kBytes);
  std::size_t pages = 0;  // read back: the compiler may drop a write that is freed unread
  for (std::size_t i = 0; i < kBytes; i += 4096) pages += static_cast<std::size_t>(first[i]);
  CHECK(pages == kBytes / 4096);
  std::free(first);
  const long before = pages_faulted();
  char* again = static_cast<char*>(std::malloc(kBytes));
  REQUIRE(again != nullptr);
  std::memset(again, 2, kBytes);
  static char* volatile escaped;  // getrusage might read it, for all the compiler knows:
  escaped = again;                // the writes stay before the count
  const long faulted = pages_faulted() - before;
  std::size_t twos = 0;
  for (std::size_t i = 0; i < kBytes; i += 4096) twos += static_cast<std::size_t>(again[i]);
  std::free(again);
  CHECK(twos == 2 * (kBytes / 4096));
  CHECK(escaped == again);
  CHECK(faulted < 64);
#else
  CHECK_FALSE(retained);
#endif
}

TEST_CASE("a thread reuses the buffers it took and freed; others go through the shared pool", "[tensor]") {
  heed::empty_buffer_cache();
  const index_t n = 1000;  // 4000 bytes: the 4096-byte class
  const std::size_t bytes = 4096;
  const float* first = nullptr;
  const float* second = nullptr;
  {
    auto a = heed::zeros({n});
    auto b = heed::zeros({n});
    first = a.data();
    second = b.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == 2 * bytes);  // both in this thread's cache
  std::uint64_t allocations = heed::buffer_allocations();
  std::promise<const float*> freed, freed_again;
  std::promise<void> emptied, checked;
  std::thread worker([&] {
    const float* p = nullptr;
    {
      auto t = heed::zeros({n});  // no idle buffer of its own or shared: one of the main thread's
      p = t.data();
    }
    freed.set_value(p);  // into the worker's own cache now: the worker took it
    emptied.get_future().wait();
    {
      auto t = heed::zeros({n});
      p = t.data();
    }
    freed_again.set_value(p);
    checked.get_future().wait();
  });
  const float* worker_buffer = freed.get_future().get();
  CHECK((worker_buffer == first || worker_buffer == second));
  CHECK(heed::buffer_allocations() == allocations);
  {
    auto t = heed::zeros({n});  // this thread's own idle buffer first
    CHECK(t.data() == (worker_buffer == first ? second : first));
    auto u = heed::zeros({n});  // then another thread's, before fresh memory
    CHECK(u.data() == worker_buffer);
    CHECK(heed::buffer_allocations() == allocations);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 2 * bytes);
  heed::empty_buffer_cache();  // frees idle buffers in every thread's cache
  CHECK(heed::buffer_cache_idle_bytes() == 0);
  emptied.set_value();
  worker_buffer = freed_again.get_future().get();
  CHECK(heed::buffer_cache_idle_bytes() == bytes);
  checked.set_value();
  worker.join();  // at its exit, the worker's idle buffer goes to the shared pool
  CHECK(heed::buffer_cache_idle_bytes() == bytes);
  allocations = heed::buffer_allocations();
  {
    auto t = heed::zeros({n});
    CHECK(t.data() == worker_buffer);
    CHECK(heed::buffer_allocations() == allocations);
  }

  // A buffer freed by a thread that did not take it goes to the shared pool: that thread
  // takes its own idle buffer before it, and the thread that took it finds it again.
  heed::empty_buffer_cache();
  auto mine = heed::zeros({n});
  const float* my_buffer = mine.data();
  std::promise<std::pair<const float*, const float*>> released;  // the other thread's buffer, what it took next
  std::promise<void> reused;
  std::thread other([&] {
    const float* own = nullptr;
    {
      auto t = heed::zeros({n});
      own = t.data();
    }
    mine = heed::Tensor<float>();
    const float* next = nullptr;
    {
      auto t = heed::zeros({n});
      next = t.data();
    }
    released.set_value({own, next});
    reused.get_future().wait();
  });
  const auto [other_buffer, other_next] = released.get_future().get();
  CHECK(other_next == other_buffer);
  allocations = heed::buffer_allocations();
  {
    auto t = heed::zeros({n});
    CHECK(t.data() == my_buffer);
    CHECK(heed::buffer_allocations() == allocations);
  }
  reused.set_value();
  other.join();
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);
}

// ---- devices ------------------------------------------------------------------------------

TEST_CASE("a Device is the CPU or a CUDA device, named as in PyTorch", "[tensor][device]") {
  CHECK(heed::Device() == heed::Device::cpu());
  CHECK(heed::Device::cpu().is_cpu());
  CHECK(heed::Device::cuda().is_cuda());
  CHECK(heed::Device::cuda().index() == 0);
  CHECK(heed::Device::cuda(2) != heed::Device::cuda(1));
  CHECK(heed::Device::cuda(0) != heed::Device::cpu());
  CHECK(heed::to_string(heed::Device::cpu()) == "cpu");
  CHECK(heed::to_string(heed::Device::cuda(3)) == "cuda:3");
  CHECK(heed::Device("cpu") == heed::Device::cpu());
  CHECK(heed::Device("cuda") == heed::Device::cuda(0));
  CHECK(heed::Device("cuda:12") == heed::Device::cuda(12));
  std::ostringstream os;
  os << heed::Device::cuda(1);
  CHECK(os.str() == "cuda:1");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", "cuda0", ""})
    CHECK_ERROR(heed::ValueError, "expected \"cpu\", \"cuda\" or \"cuda:N\"", heed::Device(bad));
  CHECK_ERROR(heed::ValueError, "index must not be negative", heed::Device::cuda(-1));
}
