// TensorDataset and DataLoader (heed/data/data_loader.hpp): rows of several tensors in
// batches, shuffled by randperm each epoch, the last batch kept or dropped, and errors.
#include <catch2/catch.hpp>
#include <heed/data/data_loader.hpp>
#include <heed/heed.hpp>

#include "check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace {

/// Features (n, 2) holding 10 i and 10 i + 5 in row i, and labels (n) holding i.
std::tuple<heed::Tensorf, heed::IndexTensor> rows_of(heed::index_t n) {
  return {heed::arange<float>(0.0, static_cast<double>(2 * n)).reshape({n, 2}) * 5.0,
          heed::arange<std::int64_t>(static_cast<double>(n))};
}

}  // namespace

TEST_CASE("TensorDataset holds rows of tensors of one first size", "[data]") {
  const auto [X, y] = rows_of(5);
  heed::TensorDataset dataset(X, y);
  static_assert(std::is_same_v<decltype(dataset), heed::TensorDataset<float, std::int64_t>>);
  CHECK(dataset.size() == 5);
  const auto [x3, y3] = dataset[3];
  CHECK(x3.to_vector() == std::vector<float>{30, 35});
  CHECK(y3.item() == 3);
  CHECK(std::get<1>(dataset[-1]).item() == 4);  // from the end, as Python's
  const auto [xs, ys] = dataset.rows(heed::tensor({4, 0, 4}));
  CHECK(xs.shape() == heed::Shape{3, 2});
  CHECK(ys.to_vector() == std::vector<std::int64_t>{4, 0, 4});
  CHECK(xs.to_vector() == std::vector<float>{40, 45, 0, 5, 40, 45});
  CHECK(std::get<0>(dataset.tensors()).shares_storage(X));
}

TEST_CASE("DataLoader without shuffle gives the rows in order, the last batch short", "[data]") {
  const auto [X, y] = rows_of(7);
  heed::DataLoader loader(heed::TensorDataset(X, y), /*batch_size=*/3);
  CHECK(loader.num_batches() == 3);
  CHECK(loader.batch_size() == 3);
  CHECK_FALSE(loader.shuffle());
  CHECK_FALSE(loader.drop_last());
  std::vector<std::vector<std::int64_t>> labels;
  for (const auto& [Xb, yb] : loader) {
    CHECK(Xb.shape() == heed::Shape{yb.numel(), 2});
    CHECK(Xb.to_vector() == heed::index_select(X, 0, yb).to_vector());  // the rows of the labels
    labels.push_back(yb.to_vector());
  }
  CHECK(labels == std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}});
  // Every epoch the same; the batches are copies, not views.
  std::size_t batches = 0;
  for (auto it = loader.begin(); it != loader.end(); ++it, ++batches)
    CHECK(std::get<1>(*it).to_vector() == labels[batches]);
  CHECK(batches == 3);
  CHECK_FALSE(std::get<0>(loader.batch(0)).shares_storage(X));
}

TEST_CASE("DataLoader with drop_last drops the short batch, as PyTorch's len(loader) says", "[data]") {
  const auto [X, y] = rows_of(7);
  heed::DataLoader loader(heed::TensorDataset(X, y), 3, /*shuffle=*/false, /*drop_last=*/true);
  CHECK(loader.num_batches() == 2);
  std::vector<std::int64_t> seen;
  for (const auto& [Xb, yb] : loader) {
    CHECK(yb.numel() == 3);
    for (const std::int64_t v : yb.to_vector()) seen.push_back(v);
  }
  CHECK(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
  // Batches that divide n evenly: drop_last changes nothing.
  const auto [X6, y6] = rows_of(6);
  CHECK(heed::DataLoader(heed::TensorDataset(X6, y6), 3, false, true).num_batches() == 2);
  CHECK(heed::DataLoader(heed::TensorDataset(X6, y6), 3, false, false).num_batches() == 2);
  // Fewer rows than a batch: one short batch, or none.
  CHECK(heed::DataLoader(heed::TensorDataset(X6, y6), 10, false, false).num_batches() == 1);
  CHECK(heed::DataLoader(heed::TensorDataset(X6, y6), 10, false, true).num_batches() == 0);
}

TEST_CASE("DataLoader with shuffle draws randperm from its generator each epoch", "[data]") {
  const auto [X, y] = rows_of(10);
  heed::Generator gen(42);
  heed::DataLoader loader(heed::TensorDataset(X, y), 4, /*shuffle=*/true, /*drop_last=*/false, gen);
  CHECK(loader.num_batches() == 3);
  heed::Generator expected_gen(42);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int epoch = 0; epoch < 3; ++epoch) {
    const std::vector<std::int64_t> expected = heed::randperm(10, expected_gen).to_vector();
    std::vector<std::int64_t> order;
    for (const auto& [Xb, yb] : loader) {
      CHECK(yb.numel() <= 4);
      CHECK(Xb.to_vector() == heed::index_select(X, 0, yb).to_vector());  // rows stay together
      for (const std::int64_t v : yb.to_vector()) order.push_back(v);
    }
    CHECK(order == expected);  // torch's RandomSampler: randperm(n, generator) per epoch
    CHECK(loader.order().to_vector() == expected);
    epochs.push_back(order);
  }
  CHECK(epochs[0] != epochs[1]);                       // a new order each epoch
  CHECK(gen.get_state() == expected_gen.get_state());  // the loader drew from the generator it was given

  // The same seed, the same epochs.
  heed::Generator again(42);
  heed::DataLoader same(heed::TensorDataset(X, y), 4, true, false, again);
  std::vector<std::int64_t> first;
  for (const auto& [Xb, yb] : same)
    for (const std::int64_t v : yb.to_vector()) first.push_back(v);
  CHECK(first == epochs[0]);

  // shuffle with drop_last: every batch full, each of a different random pick.
  heed::Generator drop_gen(5);
  heed::DataLoader dropping(heed::TensorDataset(X, y), 4, true, true, drop_gen);
  std::vector<std::int64_t> kept;
  for (const auto& [Xb, yb] : dropping) {
    CHECK(yb.numel() == 4);
    for (const std::int64_t v : yb.to_vector()) kept.push_back(v);
  }
  CHECK(kept.size() == 8);
  std::sort(kept.begin(), kept.end());
  CHECK(std::adjacent_find(kept.begin(), kept.end()) == kept.end());  // no row twice
}

TEST_CASE("DataLoader takes one tensor, or three, and empty datasets", "[data]") {
  const auto [X, y] = rows_of(5);
  heed::DataLoader single(heed::TensorDataset{X}, 2);
  std::size_t batches = 0;
  for (const auto& [Xb] : single) batches += Xb.shape()[1] == 2 ? 1 : 0;
  CHECK(batches == 3);
  const heed::BoolTensor mask = heed::tensor<bool>({true, false, true, true, false});
  heed::DataLoader three(heed::TensorDataset(X, y, mask), 5);
  const auto it = three.begin();
  const auto& [Xb, yb, mb] = *it;
  CHECK(mb.to_vector() == mask.to_vector());
  CHECK(yb.numel() == 5);
  heed::DataLoader empty(heed::TensorDataset(heed::zeros<float>({0, 3})), 4, true);
  CHECK(empty.num_batches() == 0);
  CHECK(empty.begin() == empty.end());
}

TEST_CASE("TensorDataset and DataLoader check their arguments", "[data][errors]") {
  const auto [X, y] = rows_of(5);
  CHECK_ERROR(heed::ShapeError, "TensorDataset: the tensors' sizes in dim 0 differ: (5, 2), (4)",
              heed::TensorDataset(X, heed::arange<std::int64_t>(4.0)));
  CHECK_ERROR(heed::ShapeError, "TensorDataset: tensor 1 has shape (), with no dim 0 to index",
              heed::TensorDataset(X, heed::scalar_tensor<std::int64_t>(1)));
  CHECK_ERROR(heed::ValueError, "TensorDataset: tensor 0 is an undefined tensor",
              heed::TensorDataset(heed::Tensorf(), y));
  heed::TensorDataset dataset(X, y);
  CHECK_ERROR(heed::IndexError, "TensorDataset: index 5 out of range for 5 rows", dataset[5]);
  CHECK_ERROR(heed::IndexError, "TensorDataset: index -6 out of range for 5 rows", dataset[-6]);
  CHECK_ERROR(heed::ShapeError, "TensorDataset::rows: indices must be 1-D, got shape (1, 2)",
              dataset.rows(heed::tensor({{0, 1}})));
  CHECK_ERROR(heed::IndexError, "index_select: index 7 out of range", dataset.rows(heed::tensor({7})));
  CHECK_ERROR(heed::ValueError, "TensorDataset::rows: indices is an undefined tensor",
              dataset.rows(heed::IndexTensor()));
  CHECK_ERROR(heed::ValueError, "DataLoader: batch_size must be positive, got 0", heed::DataLoader(dataset, 0));
  CHECK_ERROR(heed::ValueError, "DataLoader: batch_size must be positive, got -2", heed::DataLoader(dataset, -2));
  heed::DataLoader loader(dataset, 2);
  CHECK_ERROR(heed::IndexError, "DataLoader::batch: index 3 out of range for 3 batches", loader.batch(3));
  CHECK_ERROR(heed::IndexError, "DataLoader::batch: index -1 out of range for 3 batches", loader.batch(-1));
}
