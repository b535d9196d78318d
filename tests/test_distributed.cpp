// Data-parallel training on MPI (heed/dist/): CTest runs this program under
// `mpiexec -n 2` and `-n 3`; every rank runs every test case, in the same order, since
// each one calls the communicator's collectives.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <heed/dist/mpi.hpp>
#include <heed/heed.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "seq2seq_nets.hpp"

using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;

namespace {

heed::dist::MpiCommunicator* world_ = nullptr;
heed::dist::MpiCommunicator& world() { return *world_; }
// The same processes summing through MPI's messages, as on several machines.
heed::dist::MpiCommunicator* messages_ = nullptr;

/// Rank r's values: spread over 40 binary orders of magnitude, so that adding them in
/// another order would change the bits.
template <typename T>
std::vector<T> values_of(int rank, std::size_t n) {
  std::mt19937_64 engine(static_cast<std::uint64_t>(1000 + rank));
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(std::ldexp(mantissa(engine), exponent(engine)));
  return values;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("allreduce_sum adds the ranks' values in rank order, the same bits on every rank", "[dist]", float,
                   double) {
  using T = TestType;
  const int ranks = world().size();
  REQUIRE(ranks >= 2);
  CHECK(world().shares_memory());  // these tests run on one machine
  CHECK(!messages_->shares_memory());
  // Fewer elements than ranks (empty chunks), odd sizes, and one of several buckets' worth.
  for (heed::dist::MpiCommunicator* communicator : {world_, messages_})
    for (const std::size_t n :
         {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(1001), std::size_t(262147)}) {
      INFO("n = " << n << (communicator == world_ ? ", shared memory" : ", MPI's messages"));
      std::vector<T> data = values_of<T>(world().rank(), n);
      std::vector<T> expected = values_of<T>(0, n);
      for (int r = 1; r < ranks; ++r) {
        const std::vector<T> theirs = values_of<T>(r, n);
        for (std::size_t i = 0; i < n; ++i) expected[i] += theirs[i];
      }
      communicator->allreduce_sum(data.data(), n);
      CHECK(same_bits(data, expected));
    }
}

TEST_CASE("broadcast copies the root's bytes, numbers and text to every rank", "[dist]") {
  const int ranks = world().size(), me = world().rank();
  for (int root = 0; root < ranks; ++root) {
    std::vector<double> numbers = values_of<double>(me, 5);
    world().broadcast(numbers.data(), numbers.size(), root);
    CHECK(same_bits(numbers, values_of<double>(root, 5)));
    std::string text = me == root ? std::string(100000, static_cast<char>('a' + root)) : "short";
    world().broadcast(text, root);
    CHECK(text == std::string(100000, static_cast<char>('a' + root)));
  }
  double x = 1.0;
  CHECK_THROWS_WITH(world().broadcast(&x, 1, ranks), "MpiCommunicator::broadcast: root " + std::to_string(ranks) +
                                                         " is not a rank of " + std::to_string(ranks));
  world().barrier();
}

TEST_CASE("broadcast_parameters gives every rank rank 0's values, and names the first parameter that differs",
          "[dist]") {
  const int me = world().rank();
  heed::Generator gen(static_cast<std::uint64_t>(7 + me));  // each rank its own initial values
  heed::Linear<double> same(3, 4, true, gen);
  heed::dist::DataParallel<double> parallel(world(), same);
  parallel.broadcast_parameters();
  heed::Generator rank0(7);
  heed::Linear<double> expected(3, 4, true, rank0);
  for (const auto& [name, p] : same.named_parameters()) {
    const Tensor<double> e = expected.named_parameters()[name == "weight" ? 0 : 1].second;
    CHECK(std::memcmp(p.data(), e.data(), sizeof(double) * static_cast<std::size_t>(p.numel())) == 0);
  }
  // The last rank builds a wider layer: every rank throws, naming it.
  const bool last = me == world().size() - 1;
  heed::Linear<double> differs(3, last ? 5 : 4, true, gen);
  heed::dist::DataParallel<double> mismatched(world(), differs);
  CHECK_THROWS_WITH(mismatched.broadcast_parameters(),
                    "DataParallel: the ranks built different models: at parameter or buffer 0, rank 0 has 'weight "
                    "(4, 3)' and rank " +
                        std::to_string(world().size() - 1) +
                        " has 'weight (5, 3)' (every rank must build the same model)");
}

TEST_CASE("allreduce_gradients sums each gradient in rank order, whatever the bucket size", "[dist]") {
  const int ranks = world().size(), me = world().rank();
  const auto grad_of = [](int rank, std::size_t n) { return values_of<double>(rank, n); };
  for (const std::size_t bucket :
       {std::size_t(7), std::size_t(64), heed::dist::DataParallel<double>::kDefaultBucketElements}) {
    INFO("bucket " << bucket);
    // a: a gradient on every rank; b: on rank 0 only; c: on none; d: on the last rank only.
    std::vector<std::pair<std::string, Tensor<double>>> params;
    for (const char* name : {"a", "b", "c", "d"})
      params.emplace_back(name, heed::zeros<double>(Shape{5, 3}).requires_grad_());
    const auto set_grad = [&](std::size_t i) {
      const std::vector<double> g = grad_of(me * 10 + static_cast<int>(i), 15);
      (params[i].second * Tensor<double>(g, Shape{5, 3})).sum().backward();
    };
    set_grad(0);
    if (me == 0) set_grad(1);
    if (me == ranks - 1) set_grad(3);
    heed::dist::DataParallel<double> parallel(world(), params, {}, bucket);
    parallel.allreduce_gradients();
    std::vector<double> a = grad_of(0, 15);
    for (int r = 1; r < ranks; ++r) {
      const std::vector<double> theirs = grad_of(r * 10, 15);
      for (std::size_t i = 0; i < 15; ++i) a[i] += theirs[i];
    }
    CHECK(same_bits(params[0].second.grad().to_vector(), a));
    CHECK(same_bits(params[1].second.grad().to_vector(), grad_of(1, 15)));
    CHECK(!params[2].second.grad().defined());
    CHECK(same_bits(params[3].second.grad().to_vector(), grad_of((ranks - 1) * 10 + 3, 15)));
    CHECK(parallel.communication_seconds() > 0.0);
  }
  // Rows that are +0 on every rank stay out of the buffer; the others are summed, a row
  // whose only bits are a -0 on one rank included (-0 + 0 = +0, as one process adds).
  const auto embedding_grad = [](int rank) {
    std::vector<double> g(6 * 3, 0.0);
    const std::vector<double> row = values_of<double>(rank, 3);
    std::copy(row.begin(), row.end(), g.begin() + 3 * rank);  // row `rank`: 0 to ranks - 1 < 4
    if (rank == 0) g[5 * 3 + 1] = -0.0;                       // row 5: a -0 on rank 0 alone; row 4: +0 everywhere
    return g;
  };
  auto weight = heed::zeros<double>(Shape{6, 3}).requires_grad_();
  (weight * Tensor<double>(embedding_grad(me), Shape{6, 3})).sum().backward();
  heed::dist::DataParallel<double> parallel(world(), {{"embedding.weight", weight}}, {}, 4);
  parallel.allreduce_gradients();
  std::vector<double> expected = embedding_grad(0);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<double> theirs = embedding_grad(r);
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += theirs[i];
  }
  CHECK(same_bits(weight.grad().to_vector(), expected));
  CHECK(parallel.elements_summed() == 3 * static_cast<std::size_t>(ranks + 1));  // the rows +0 everywhere left out
  CHECK(!std::signbit(weight.grad().to_vector()[5 * 3 + 1]));
}

TEST_CASE("check_same_settings passes equal settings and names the first difference on every rank", "[dist]") {
  using Settings = std::map<std::string, std::string>;
  const int ranks = world().size(), me = world().rank(), last = ranks - 1;
  const Settings base = {{"--epochs", "1"}, {"--model", "transformer"}, {"--seed", "1"}};
  heed::dist::check_same_settings(world(), base, "translate");
  heed::dist::check_same_settings(world(), {});
  // Any bytes in names and values: lengths, colons, digits, newlines, NUL.
  const Settings odd = {{"12:3", std::string("a\0b:\n7:", 8)}, {"", ""}, {":", "1:x"}};
  heed::dist::check_same_settings(world(), odd);
  const auto with = [&](int rank, const std::string& name, const char* value) {
    Settings s = base;
    if (me == rank) {
      if (value)
        s[name] = value;
      else
        s.erase(name);
    }
    return s;
  };
  const std::string prefix = "translate: ranks were given different settings: ";
  CHECK_THROWS_AS(heed::dist::check_same_settings(world(), with(last, "--seed", "2"), "translate"), heed::ValueError);
  CHECK_THROWS_WITH(heed::dist::check_same_settings(world(), with(last, "--seed", "2"), "translate"),
                    prefix + "--seed is '1' on rank 0 and '2' on rank " + std::to_string(last));
  // Rank 0 differs from the others: each of them differs from it; the lowest is named.
  CHECK_THROWS_WITH(heed::dist::check_same_settings(world(), with(0, "--model", "bahdanau"), "translate"),
                    prefix + "--model is 'bahdanau' on rank 0 and 'transformer' on rank 1");
  // A setting one rank lacks, or has alone; no operation: no prefix.
  CHECK_THROWS_WITH(
      heed::dist::check_same_settings(world(), with(last, "--seed", nullptr), ""),
      "ranks were given different settings: --seed is '1' on rank 0 and not set on rank " + std::to_string(last));
  CHECK_THROWS_WITH(heed::dist::check_same_settings(world(), with(last, "--beam", "4"), "translate"),
                    prefix + "--beam is not set on rank 0 and '4' on rank " + std::to_string(last));
  // Several differences on a rank: the first in the map's order.
  Settings two = base;
  if (me == last) two["--seed"] = "2", two["--epochs"] = "3";
  CHECK_THROWS_WITH(heed::dist::check_same_settings(world(), two, "translate"),
                    prefix + "--epochs is '1' on rank 0 and '3' on rank " + std::to_string(last));
  // Several ranks differ: the lowest is named (rank 1 and, with 3, rank 2 too).
  Settings many = base;
  if (me > 0) many["--micro-batches"] = std::to_string(me);
  CHECK_THROWS_WITH(heed::dist::check_same_settings(world(), many),
                    "check_same_settings: ranks were given different settings: --micro-batches is not set on rank 0 "
                    "and '1' on rank 1");
  // Values with odd bytes are named whole (but NUL: what() would end there).
  Settings odd_differs = odd;
  odd_differs["12:3"] = me == last ? "x:y" : "b:\n7:";
  CHECK_THROWS_WITH(
      heed::dist::check_same_settings(world(), odd_differs, "op"),
      "op: ranks were given different settings: 12:3 is 'b:\n7:' on rank 0 and 'x:y' on rank " + std::to_string(last));
  // After all that, the ranks are still in step.
  heed::dist::check_same_settings(world(), base, "translate");
  CHECK(heed::dist::fnv1a("", 0) == heed::dist::kFnv1aOffset);
  CHECK(heed::dist::fnv1a("a", 1) == 0xaf63dc4c8601ec8cull);  // FNV-1a 64's published value
  CHECK(heed::dist::fnv1a("b", 1, heed::dist::fnv1a("a", 1)) == heed::dist::fnv1a("ab", 2));
}

// ---- train_seq2seq on N ranks = one process adding the same N parts in rank order -------------

namespace {

/// 73 pairs in batches of 8: 9 of 8 rows (4 + 4 on 2 ranks, 2 + 3 + 3 on 3) and a last
/// one of a single row, which rank 0 alone trains.
heed::NmtData corpus() {
  return heed::load_data_nmt_text(heed::builtin_fra_eng(), /*batch_size=*/8, /*num_steps=*/10, 72, /*seed=*/3);
}

struct Trained {
  std::vector<double> parameters;
  std::vector<double> losses;
};

template <typename Net>
Trained train(heed::dist::Communicator* communicator, index_t micro_batches) {
  heed::NmtData data = corpus();
  auto net = dropout_net<Net>(data, 0.2);
  heed::TrainOptions options;
  heed::Generator init_gen(4);
  options.generator = &init_gen;
  options.micro_batches = micro_batches;
  options.communicator = communicator;
  heed::manual_seed(8);  // dropout's generator
  const heed::TrainResult result = heed::train_seq2seq<double>(*net, data.data_iter, 0.01, 3, data.tgt_vocab, options);
  Trained trained;
  trained.losses = result.losses;
  for (const auto& [name, p] : net->named_parameters())
    trained.parameters.insert(trained.parameters.end(), p.data(), p.data() + p.numel());
  return trained;
}

}  // namespace

TEMPLATE_TEST_CASE("train_seq2seq on N ranks gives the parameters of one process adding N micro-batches in rank order",
                   "[dist]", TransformerNet<double>, BahdanauNet<double>) {
  using Net = TestType;
  {
    heed::NmtData data = corpus();
    std::vector<index_t> rows;
    for (const heed::NmtBatch& batch : data.data_iter) rows.push_back(batch.X.shape()[0]);
    REQUIRE(rows == std::vector<index_t>{8, 8, 8, 8, 8, 8, 8, 8, 8, 1});
  }
  const index_t ranks = world().size();
  const Trained one_process = train<Net>(nullptr, ranks);
  const Trained parallel = train<Net>(&world(), 1);
  REQUIRE(parallel.parameters.size() == one_process.parameters.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < parallel.parameters.size(); ++i)
    differ += std::memcmp(&parallel.parameters[i], &one_process.parameters[i], sizeof(double)) != 0;
  CHECK(differ == 0);
  // The losses are summed per rank first: the same to rounding.
  REQUIRE(parallel.losses.size() == 3);
  for (std::size_t e = 0; e < 3; ++e) CHECK(parallel.losses[e] == Approx(one_process.losses[e]).epsilon(1e-12));
  // Dropout was on, and part i's masks are drawn from part i's generator: a split into
  // one part per batch gives other parameters.
  CHECK(train<Net>(nullptr, 1).parameters != one_process.parameters);
}

TEST_CASE("train_seq2seq compares the ranks' options, loaders and generators before training", "[dist]") {
  const int last = world().size() - 1;
  const bool odd_one = world().rank() == last;
  const std::string prefix = "train_seq2seq: ranks were given different settings: ";
  const auto attempt = [&](auto&& change) {
    heed::NmtData data = corpus();
    auto net = dropout_net<TransformerNet<double>>(data, 0.2);
    heed::TrainOptions options;
    options.communicator = &world();
    heed::index_t epochs = 1;
    heed::manual_seed(8);
    if (odd_one) change(data, options, epochs);
    heed::train_seq2seq<double>(*net, data.data_iter, 0.01, epochs, data.tgt_vocab, options);
  };
  const std::string on_last = " on rank " + std::to_string(last);
  CHECK_THROWS_AS(attempt([](heed::NmtData&, heed::TrainOptions&, heed::index_t& epochs) { epochs = 2; }),
                  heed::ValueError);
  CHECK_THROWS_WITH(attempt([](heed::NmtData&, heed::TrainOptions&, heed::index_t& epochs) { epochs = 2; }),
                    prefix + "num_epochs is '1' on rank 0 and '2'" + on_last);
  CHECK_THROWS_WITH(attempt([](heed::NmtData&, heed::TrainOptions& o, heed::index_t&) { o.micro_batches = 2; }),
                    prefix + "micro_batches is '1' on rank 0 and '2'" + on_last);
  // TrainOptions' deprecated spelling of TrainState::epoch_batches_done, still honoured.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_THROWS_WITH(attempt([](heed::NmtData&, heed::TrainOptions& o, heed::index_t&) { o.skip_batches = 3; }),
                    prefix + "skip_batches is '0' on rank 0 and '3'" + on_last);
#pragma GCC diagnostic pop
  CHECK_THROWS_WITH(
      attempt([](heed::NmtData& d, heed::TrainOptions&, heed::index_t&) { d.data_iter.generator().manual_seed(5); }),
      Catch::StartsWith(prefix + "the loader's generator is 'FNV-1a "));
  CHECK_THROWS_WITH(attempt([](heed::NmtData&, heed::TrainOptions&, heed::index_t&) { heed::manual_seed(9); }),
                    Catch::StartsWith(prefix + "the default generator (dropout) is 'FNV-1a "));
  // A loader one epoch ahead: the current epoch's first batch is named before the generator.
  CHECK_THROWS_WITH(attempt([](heed::NmtData& d, heed::TrainOptions&, heed::index_t&) {
                      for (auto it = d.data_iter.begin(); it != d.data_iter.end(); ++it) {
                      }
                    }),
                    Catch::StartsWith(prefix + "the loader's first batch is 'FNV-1a "));
  // The same settings everywhere still train (the bits: the test above).
  attempt([](heed::NmtData&, heed::TrainOptions&, heed::index_t&) {});
}

namespace {

/// The corpus's loader, except that rank 1 fails as its second epoch begins.
struct FailingLoader {
  heed::NmtDataLoader inner;
  int epochs = 0;
  auto begin() {
    if (++epochs == 2 && world().rank() == 1) throw heed::FileError("corpus.txt:12: a broken line, on purpose");
    return inner.begin();
  }
  auto end() { return inner.end(); }
};

}  // namespace

// Run by its own CTest (dist.mpi_abort), which expects rank 1's message from mpiexec:
// rank 0, waiting in its next sum, is ended with it.
TEST_CASE("an exception on one rank ends every rank with its message", "[.abort]") {
  heed::NmtData data = corpus();
  auto net = dropout_net<TransformerNet<double>>(data, 0.2);
  heed::TrainOptions options;
  options.communicator = &world();
  FailingLoader loader{data.data_iter};
  heed::train_seq2seq<double>(*net, loader, 0.01, 3, data.tgt_vocab, options);
  FAIL("rank " << world().rank() << " finished training");
}

int main(int argc, char** argv) {
  heed::dist::MpiSession mpi(&argc, &argv);
  int result = 0;
  {
    heed::dist::MpiCommunicator world, messages(MPI_COMM_WORLD, /*share_memory=*/false);
    world_ = &world;
    messages_ = &messages;
    result = Catch::Session().run(argc, argv);
    world_ = messages_ = nullptr;
  }
  return result;
}
