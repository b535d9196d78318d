// Embedding (heed/nn/embedding.hpp): its weight, lookups and gradients, initialisation
// and errors.
#include "nn_common.hpp"

// ---- Embedding ------------------------------------------------------------------------------

TEST_CASE("Embedding has one (num_embeddings, embedding_dim) weight", "[nn]") {
  heed::Generator gen(0);
  heed::Embedding<float> embedding(200, 24, gen);
  CHECK(embedding.num_embeddings() == 200);
  CHECK(embedding.embedding_dim() == 24);
  CHECK(embedding.weight.shape() == heed::Shape{200, 24});
  CHECK(names_of(embedding.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(embedding.weight.requires_grad());
  CHECK(embedding.weight.is_leaf());
  CHECK(embedding.num_parameters() == 200 * 24);
  CHECK(embedding.repr() == "Embedding(200, 24)");
  CHECK(heed::Embedding<double>(1, 1, gen).repr() == "Embedding(1, 1)");
}

TEST_CASE("Embedding looks up rows of its weight and sends gradients back to them", "[nn]") {
  heed::Generator gen(1);
  heed::Embedding<float> embedding(10, 4, gen);
  const heed::IndexTensor tokens({0, 5, 9, 5, 5, 2}, heed::Shape{2, 3});
  const auto X = embedding(tokens);
  REQUIRE(X.shape() == heed::Shape{2, 3, 4});
  for (index_t i = 0; i < 6; ++i)
    for (index_t d = 0; d < 4; ++d) {
      INFO("token " << i << " dim " << d);
      CHECK(X.data()[i * 4 + d] == embedding.weight.data()[tokens.data()[i] * 4 + d]);
    }
  CHECK(embedding.forward(tokens).to_vector() == X.to_vector());
  CHECK(X.grad_fn_name() == "EmbeddingBackward");

  X.sum().backward();
  std::vector<float> expected(40, 0.f);
  for (index_t d = 0; d < 4; ++d) {
    expected[static_cast<std::size_t>(0 * 4 + d)] = 1;
    expected[static_cast<std::size_t>(5 * 4 + d)] = 3;  // used three times
    expected[static_cast<std::size_t>(9 * 4 + d)] = 1;
    expected[static_cast<std::size_t>(2 * 4 + d)] = 1;
  }
  CHECK(embedding.weight.grad().to_vector() == expected);

  const Fn f = [](const Inputs& in) { return heed::embedding(in[0], heed::IndexTensor({3, 1, 3, 0}, {2, 2})); };
  CHECK_GRADIENTS(f, {leaf({4, 5}, 2)});
}

TEST_CASE("Embedding initialises from N(0, 1), by seed", "[nn]") {
  heed::Generator gen(11);
  heed::Embedding<double> embedding(1000, 100, gen);
  const auto values = embedding.weight.to_vector();
  double mean = 0, var = 0, beyond_two = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  for (double v : values) {
    var += (v - mean) * (v - mean) / static_cast<double>(values.size());
    beyond_two += std::fabs(v) > 2 ? 1 : 0;
  }
  CHECK(mean == Approx(0).margin(0.02));
  CHECK(std::sqrt(var) == Approx(1).margin(0.02));
  CHECK(beyond_two / static_cast<double>(values.size()) == Approx(0.0455).margin(0.005));  // P(|z| > 2)

  heed::Generator g1(42), g2(42), g3(43);
  heed::Embedding<float> a(6, 3, g1), b(6, 3, g2), c(6, 3, g3);
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  CHECK(a.weight.to_vector() != c.weight.to_vector());
  heed::manual_seed(5);
  heed::Embedding<float> d(6, 3);
  heed::Generator g5(5);
  heed::Embedding<float> e(6, 3, g5);
  CHECK(d.weight.to_vector() == e.weight.to_vector());
}

TEST_CASE("Embedding refuses bad sizes and out-of-range tokens", "[nn][errors]") {
  CHECK_ERROR(heed::ValueError, "Embedding: num_embeddings and embedding_dim must be positive, got 0 and 24",
              heed::Embedding<float>(0, 24));
  CHECK_ERROR(heed::ValueError, "Embedding: num_embeddings and embedding_dim must be positive, got 10 and -1",
              heed::Embedding<float>(10, -1));
  heed::Generator gen(0);
  heed::Embedding<float> embedding(10, 4, gen);
  CHECK_ERROR(heed::IndexError, "embedding: index 10 at flat position 2 of indices (1, 3) is out of range for 10",
              embedding(heed::IndexTensor({0, 9, 10}, {1, 3})));
  CHECK_ERROR(heed::IndexError, "embedding: index -3", embedding(heed::IndexTensor({-3}, {1})));
  CHECK_ERROR(heed::ValueError, "embedding: indices is an undefined tensor", embedding(heed::IndexTensor()));
}
