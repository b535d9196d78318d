// The op table's entries for lookups, recurrences, losses, attention and shape ops,
// and table(), the whole list (see tests/op_table.hpp).
#pragma once

#include "op_table_errors.hpp"
#include "op_table_goldens.hpp"
#include "op_table_math.hpp"

namespace heed_test::op_table {

inline void add_shape_and_model_entries(std::vector<Entry>& t) {
  using DS = DeviceSupport;
  // ---- lookups, recurrences, losses, attention
  t.push_back(
      entry("embedding", op([](const auto& x, const Case& c) { return heed::embedding(x[0], index_on(c, x)); }),
            {Case{{Shape{5, 3}}, {}, ints({4, 0, 4, 2, 4, 1, 0, 0}, {2, 2, 2})}, Case{{Shape{4, 3}}, {}, ints({2}, {})},
             Case{{Shape{4, 3}}, {}, ints({}, {0})}, Case{{Shape{4, 0}}, {}, ints({1, 3}, {2})}})
          .on_device_also({Case{{Shape{6, 4}}, {}, ints({3, 0, 3, 5, 1, 3}, {2, 3})}})
          .reference([](const Inputs<double>& x, const Case& c) {
            Shape s = c.index.shape();
            s.push_back(x[0].shape()[1]);
            return generate(s, [&](const Index& i) {
              return at(x[0], {c.index.data()[ravel(Index(i.begin(), i.end() - 1), c.index.shape())], i.back()});
            });
          }));
  t.push_back(entry("gru_layer", op([](const auto& x, const Case&) { return heed::gru_layer(x[0], x[1], x[2], x[3]); }),
                    {Case{{Shape{3, 2, 6}, Shape{2, 2}, Shape{6, 2}, Shape{6}}},
                     Case{{Shape{1, 1, 3}, Shape{1, 1}, Shape{3, 1}, Shape{3}}},
                     Case{{Shape{2, 0, 6}, Shape{0, 2}, Shape{6, 2}, Shape{6}}}})
                  .reference(gru_ref)
                  .tolerance(1e-10)
                  .on_device_also({Case{{Shape{5, 4, 24}, Shape{4, 8}, Shape{24, 8}, Shape{24}}}}));
  // index: labels; args {reduction: 0 none, 1 mean, 2 sum}
  {
    const IndexTensor labels = ints({1, 0, 4, 4, 2, 3}, {2, 3});
    t.push_back(
        entry("cross_entropy", op([](const auto& x, const Case& c) {
                const heed::Reduction r[] = {heed::Reduction::none, heed::Reduction::mean, heed::Reduction::sum};
                const double label_smoothing = c.args.size() > 1 ? static_cast<double>(c.args[1]) / 100 : 0.0;
                return heed::cross_entropy(x[0], index_on(c, x), r[c.args[0]], label_smoothing);
              }),
              {Case{{Shape{2, 3, 5}}, {0}, labels}, Case{{Shape{2, 3, 5}}, {1}, labels},
               Case{{Shape{2, 3, 5}}, {2}, labels}, Case{{Shape{4}}, {0}, ints({3}, {})},
               Case{{Shape{4}}, {1}, ints({3}, {})}, Case{{Shape{0, 5}}, {0}, ints({}, {0})},
               Case{{Shape{0, 5}}, {2}, ints({}, {0})}})
            .reference(cross_entropy_ref)
            .inputs({Domain{-2, 2}})
            .large({Case{{Shape{1600, 64}}, {1}, cycle(Shape{1600}, 64)}})
            // args {reduction, label smoothing in %}
            .on_device_also({Case{{Shape{2, 3, 5}}, {0, 10}, labels}, Case{{Shape{2, 3, 5}}, {1, 10}, labels},
                             Case{{Shape{2, 3, 5}}, {2, 10}, labels}, Case{{Shape{2, 3, 5}}, {0, 100}, labels},
                             Case{{Shape{2, 3, 5}}, {1, 100}, labels}, Case{{Shape{2, 3, 5}}, {2, 100}, labels}}));
    // d2l's MaskedSoftmaxCELoss (heed/seq2seq/loss.hpp): index: labels; args {mean_steps,
    // label smoothing in %, valid lengths...}. Its reference: cross_entropy of each step,
    // the valid ones summed per sequence, over mean_steps (0: the steps).
    t.push_back(entry("masked_softmax_ce_loss", op([](const auto& x, const Case& c) {
                        const IndexTensor valid_len = ints(std::vector<std::int64_t>(c.args.begin() + 2, c.args.end()),
                                                           Shape{static_cast<index_t>(c.args.size() - 2)});
                        return heed::masked_softmax_ce_loss(x[0], index_on(c, x),
                                                            x[0].defined() ? valid_len.to(x[0].device()) : valid_len,
                                                            c.args[0], static_cast<double>(c.args[1]) / 100);
                      }),
                      {Case{{Shape{2, 3, 5}}, {0, 0, 2, 0}, labels}, Case{{Shape{2, 3, 5}}, {5, 0, 2, 0}, labels},
                       Case{{Shape{2, 3, 5}}, {0, 10, 3, 1}, labels}, Case{{Shape{2, 3, 5}}, {5, 100, 2, 0}, labels},
                       Case{{Shape{2, 3, 5}}, {5, 10, 2, 0}, labels}, Case{{Shape{2, 3, 5}}, {0, 100, 3, 2}, labels}})
                    .reference([](const Inputs<double>& x, const Case& c) {
                      const std::vector<double> losses =
                          heed::cross_entropy(x[0].detach(), c.index, heed::Reduction::none,
                                              static_cast<double>(c.args[1]) / 100)
                              .to_vector();
                      const index_t batch = x[0].shape()[0], steps = x[0].shape()[1];
                      const double over = static_cast<double>(c.args[0] > 0 ? c.args[0] : steps);
                      std::vector<double> out(static_cast<std::size_t>(batch));
                      for (index_t b = 0; b < batch; ++b)
                        for (index_t s = 0; s < std::min(c.args[static_cast<std::size_t>(2 + b)], steps); ++s)
                          out[static_cast<std::size_t>(b)] += losses[static_cast<std::size_t>(b * steps + s)] / over;
                      return Tensord(out, Shape{batch});
                    })
                    .inputs({Domain{-2, 2}}));
  }
  // args {reduction: 0 none, 1 mean (the default), 2 sum}; input and target of one shape
  for (const bool l1 : {false, true})
    t.push_back(
        entry(l1 ? "l1_loss" : "mse_loss", op([l1](const auto& x, const Case& c) {
                const heed::Reduction r[] = {heed::Reduction::none, heed::Reduction::mean, heed::Reduction::sum};
                if (c.args[0] == 1) return l1 ? heed::l1_loss(x[0], x[1]) : heed::mse_loss(x[0], x[1]);
                return l1 ? heed::l1_loss(x[0], x[1], r[c.args[0]]) : heed::mse_loss(x[0], x[1], r[c.args[0]]);
              }),
              {Case{{Shape{2, 3}, Shape{2, 3}}, {0}}, Case{{Shape{2, 3}, Shape{2, 3}}, {1}},
               Case{{Shape{2, 3}, Shape{2, 3}}, {2}}, Case{{Shape{2, 3, 4}, Shape{2, 3, 4}}, {1}},
               Case{{Shape{}, Shape{}}, {0}}, Case{{Shape{}, Shape{}}, {1}}, Case{{Shape{0, 3}, Shape{0, 3}}, {0}},
               Case{{Shape{0, 3}, Shape{0, 3}}, {2}}})
            .reference([l1](const Inputs<double>& x, const Case& c) {
              const Tensord losses = generate(x[0].shape(), [&](const Index& i) {
                const double d = at(x[0], i) - at(x[1], i);
                return l1 ? std::abs(d) : d * d;
              });
              double total = 0;
              for (double v : losses.to_vector()) total += v;
              if (c.args[0] == 0) return losses;
              return Tensord({c.args[0] == 1 ? total / static_cast<double>(losses.numel()) : total}, Shape{});
            })
            .large({Case{{Shape{3, 32768}, Shape{3, 32768}}, {1}}}));
  // linear then cross_entropy, fused (x, weight[, bias]); index: labels; args {reduction}.
  // 600 classes make three tiles of the classes (the last one short); the large case
  // has three blocks of rows too.
  {
    const IndexTensor labels = ints({1, 0, 4, 4, 2, 3}, {2, 3});
    t.push_back(
        entry("linear_cross_entropy", op([](const auto& x, const Case& c) {
                const heed::Reduction r[] = {heed::Reduction::none, heed::Reduction::mean, heed::Reduction::sum};
                using T = typename std::decay_t<decltype(x[0])>::value_type;
                return heed::linear_cross_entropy(x[0], x[1], x.size() > 2 ? x[2] : Tensor<T>(), index_on(c, x),
                                                  r[c.args[0]]);
              }),
              {Case{{Shape{2, 3, 4}, Shape{5, 4}, Shape{5}}, {0}, labels},
               Case{{Shape{2, 3, 4}, Shape{5, 4}, Shape{5}}, {1}, labels},
               Case{{Shape{2, 3, 4}, Shape{5, 4}}, {2}, labels}, Case{{Shape{4}, Shape{3, 4}}, {1}, ints({2}, {})},
               Case{{Shape{3, 2}, Shape{600, 2}, Shape{600}}, {0}, ints({599, 0, 300}, {3})},
               Case{{Shape{0, 4}, Shape{5, 4}, Shape{5}}, {2}, ints({}, {0})}})
            .reference([](const Inputs<double>& x, const Case& c) { return cross_entropy_ref({linear_ref(x, c)}, c); })
            .inputs({Domain{-2, 2}})
            .large({Case{{Shape{1100, 16}, Shape{700, 16}, Shape{700}}, {1}, cycle(Shape{1100}, 700)}})
            .autocast(1e-2));
  }
  // index: valid lengths; args {causal, dropout in %, seed of the generator}. A CUDA
  // device runs its fused kernels (src/cuda/attention.cu).
  t.push_back(
      entry(
          "scaled_dot_product_attention", op([](const auto& x, const Case& c) {
            using T = typename std::decay_t<decltype(x[0])>::value_type;
            heed::AttentionMask<T> mask;
            if (c.index.defined()) mask.with_valid_lens(index_on(c, x));
            mask.with_causal(c.args[0] != 0);
            heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
            return heed::scaled_dot_product_attention(x[0], x[1], x[2], mask, static_cast<double>(c.args[1]) / 100.0,
                                                      draws);
          }),
          {Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, ints({2, 5}, {2})},
           Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, ints({0, 3}, {2})},
           Case{{Shape{2, 2, 3, 4}, Shape{2, 2, 5, 4}, Shape{2, 2, 5, 3}}, {0, 0, 0}, ints({1, 2, 3, 4, 5, 2}, {2, 3})},
           Case{{Shape{2, 4, 4}, Shape{2, 4, 4}, Shape{2, 4, 2}}, {1, 0, 0}},
           Case{{Shape{1, 4, 3, 4}, Shape{1, 2, 5, 4}, Shape{1, 2, 5, 3}}, {0, 0, 0}},
           Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 30, 9}, ints({4, 5}, {2})},
           Case{{Shape{2, 0, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, {}, 0.0, DS::full},
           Case{{Shape{2, 3, 4}, Shape{2, 0, 4}, Shape{2, 0, 3}}, {0, 0, 0}, {}, 0.0, DS::full}})
          .reference(attention_ref)
          .tolerance(1e-10)
          .inputs({Domain{-2, 2}})
          // the device's fused kernels: grouped heads, causal, dropout, more rows and keys
          .on_device_also(
              {Case{{Shape{2, 4, 37, 16}, Shape{2, 2, 41, 16}, Shape{2, 2, 41, 8}}, {1, 20, 5}},
               Case{{Shape{3, 29, 8}, Shape{3, 33, 8}, Shape{3, 33, 5}}, {0, 0, 0}, ints({33, 1, 17}, {3})}})
          .large({Case{{Shape{3, 2, 70, 8}, Shape{3, 2, 70, 8}, Shape{3, 2, 70, 8}}, {1, 10, 3}}}));
  // ---- shape ops: views
  t.push_back(entry("reshape", op([](const auto& x, const Case& c) { return heed::reshape(x[0], c.args); }),
                    {Case{{Shape{2, 3, 4}}, {4, -1}}, Case{{Shape{2, 3, 4}}, {24}}, Case{{Shape{}}, {1, 1}},
                     Case{{Shape{0, 3}}, {3, 0}}, Case{{Shape{2, 3}}, {-1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    index_t known = 1;
                    for (std::int64_t a : c.args)
                      if (a >= 0) known *= a;
                    Shape s;
                    for (std::int64_t a : c.args) s.push_back(a >= 0 ? a : x[0].numel() / known);
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("flatten", op([](const auto& x, const Case& c) {
                      return heed::flatten(x[0], static_cast<int>(c.args[0]), static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{2, 3, 4}}, {0, -1}}, Case{{Shape{2, 3, 4}}, {1, -1}}, Case{{Shape{2, 3, 4}}, {0, 1}},
                     Case{{Shape{}}, {0, -1}}, Case{{Shape{0, 3}}, {0, -1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    if (x[0].dim() == 0) return same_data(x[0], Shape{1});
                    const int start = norm_dim(c.args[0], x[0].dim()), end = norm_dim(c.args[1], x[0].dim());
                    Shape s;
                    for (int d = 0; d < x[0].dim(); ++d) {
                      if (d > start && d <= end)
                        s[-1] *= x[0].shape()[d];
                      else
                        s.push_back(x[0].shape()[d]);
                    }
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("unsqueeze",
                    op([](const auto& x, const Case& c) { return heed::unsqueeze(x[0], static_cast<int>(c.args[0])); }),
                    {Case{{Shape{2, 3}}, {0}}, Case{{Shape{2, 3}}, {-1}}, Case{{Shape{2, 3}}, {1}},
                     Case{{Shape{}}, {0}}, Case{{Shape{0}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    Shape s = x[0].shape();
                    s.insert(c.args[0] < 0 ? static_cast<int>(c.args[0]) + x[0].dim() + 1 : static_cast<int>(c.args[0]),
                             1);
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("squeeze", op([](const auto& x, const Case& c) {
                      return c.args.empty() ? heed::squeeze(x[0]) : heed::squeeze(x[0], static_cast<int>(c.args[0]));
                    }),
                    {Case{{Shape{2, 1, 3, 1}}}, Case{{Shape{2, 1, 3}}, {1}}, Case{{Shape{2, 3}}, {0}}, Case{{Shape{}}},
                     Case{{Shape{0, 1}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    Shape s;
                    for (int d = 0; d < x[0].dim(); ++d) {
                      const bool drop =
                          x[0].shape()[d] == 1 && (c.args.empty() || norm_dim(c.args[0], x[0].dim()) == d);
                      if (!drop) s.push_back(x[0].shape()[d]);
                    }
                    return same_data(x[0], s);
                  }));
  // ---- shape ops: copies
  t.push_back(entry("permute", op([](const auto& x, const Case& c) {
                      return heed::permute(x[0], std::vector<int>(c.args.begin(), c.args.end()));
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 0, 1}}, Case{{Shape{2, 3, 4, 5}}, {0, 2, 1, 3}}, Case{{Shape{}}, {}},
                     Case{{Shape{0, 3}}, {1, 0}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return permute_ref(x[0], std::vector<int>(c.args.begin(), c.args.end()));
                  }));
  t.push_back(entry("transpose", op([](const auto& x, const Case& c) {
                      return heed::transpose(x[0], static_cast<int>(c.args[0]), static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{4, 6}}, {0, 1}}, Case{{Shape{2, 3, 4}}, {-1, -2}}, Case{{Shape{2, 3, 4}}, {0, 2}},
                     Case{{Shape{3}}, {0, 0}}, Case{{Shape{0, 2}}, {0, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    std::vector<int> dims(static_cast<std::size_t>(x[0].dim()));
                    for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
                    std::swap(dims[static_cast<std::size_t>(norm_dim(c.args[0], x[0].dim()))],
                              dims[static_cast<std::size_t>(norm_dim(c.args[1], x[0].dim()))]);
                    return permute_ref(x[0], dims);
                  }));
  // args {dim, start, end, step}
  t.push_back(entry("slice", op([](const auto& x, const Case& c) {
                      return heed::slice(x[0], static_cast<int>(c.args[0]), c.args[1], c.args[2], c.args[3]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 0, 4, 2}}, Case{{Shape{2, 3, 4}}, {1, -2, 100, 1}},
                     Case{{Shape{2, 3, 4}}, {2, 1, 4, 3}}, Case{{Shape{2, 3, 4}}, {0, 1, 1, 1}},
                     Case{{Shape{9, 4}}, {0, 1, 8, 3}}, Case{{Shape{0, 4}}, {1, 1, 3, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return slice_ref(x[0], norm_dim(c.args[0], x[0].dim()), c.args[1], c.args[2], c.args[3]);
                  }));
  // args {dim, start, length}
  t.push_back(entry("narrow", op([](const auto& x, const Case& c) {
                      return heed::narrow(x[0], static_cast<int>(c.args[0]), c.args[1], c.args[2]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 1, 2}}, Case{{Shape{2, 3, 4}}, {0, -1, 1}},
                     Case{{Shape{2, 3, 4}}, {1, 0, 0}}, Case{{Shape{4, 6, 3}}, {1, 2, 3}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t start = c.args[1] < 0 ? c.args[1] + x[0].shape()[dim] : c.args[1];
                    return slice_ref(x[0], dim, start, start + c.args[2], 1);
                  }));
  // args {dim, index}
  t.push_back(entry("select", op([](const auto& x, const Case& c) {
                      return heed::select(x[0], static_cast<int>(c.args[0]), c.args[1]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {1, 2}}, Case{{Shape{2, 3, 4}}, {-1, -1}}, Case{{Shape{3}}, {0, 1}},
                     Case{{Shape{2, 0}}, {0, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t i = c.args[1] < 0 ? c.args[1] + x[0].shape()[dim] : c.args[1];
                    Shape s = x[0].shape();
                    s.erase(dim);
                    return same_data(slice_ref(x[0], dim, i, i + 1, 1), s);
                  }));
  // Backward on the device adds into one element from several threads, which heed does
  // not do: forward only, but where nothing is repeated.
  t.push_back(entry("repeat", op([](const auto& x, const Case& c) { return heed::repeat(x[0], c.args); }),
                    {Case{{Shape{2, 3}}, {2, 2}}, Case{{Shape{2, 3}}, {2, 1, 3}}, Case{{Shape{}}, {3}},
                     Case{{Shape{3, 1}}, {1, 4}}, Case{{Shape{2, 3}}, {1, 1}, {}, 0.0, DS::full},
                     Case{{Shape{2, 3}}, {0, 1}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const std::size_t extra = c.args.size() - static_cast<std::size_t>(x[0].dim());
                    Shape s;
                    for (std::size_t d = 0; d < c.args.size(); ++d)
                      s.push_back(c.args[d] * (d < extra ? 1 : x[0].shape()[static_cast<int>(d - extra)]));
                    return generate(s, [&](const Index& i) {
                      Index j;
                      for (std::size_t d = extra; d < i.size(); ++d)
                        j.push_back(i[d] % x[0].shape()[static_cast<int>(d - extra)]);
                      return at(x[0], j);
                    });
                  })
                  .on_device(DS::forward_only));
  // args {repeats, dim}
  t.push_back(entry("repeat_interleave", op([](const auto& x, const Case& c) {
                      return heed::repeat_interleave(x[0], c.args[0], static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{2, 3}}, {2, 0}}, Case{{Shape{2, 3}}, {3, -1}}, Case{{Shape{}}, {2, 0}},
                     Case{{Shape{2, 3}}, {1, 0}, {}, 0.0, DS::full}, Case{{Shape{2, 3}}, {0, 1}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const Tensord flat = x[0].dim() == 0 ? same_data(x[0], Shape{1}) : x[0];
                    const int dim = norm_dim(c.args[1], flat.dim());
                    Shape s = flat.shape();
                    s[dim] *= c.args[0];
                    return generate(s, [&](const Index& i) {
                      Index j = i;
                      j[static_cast<std::size_t>(dim)] /= c.args[0];
                      return at(flat, j);
                    });
                  })
                  .on_device(DS::forward_only));
  // args: the shape to expand to
  t.push_back(entry("expand", op([](const auto& x, const Case& c) { return heed::expand(x[0], shape_of(c.args)); }),
                    {Case{{Shape{3, 1}}, {2, 3, 4}}, Case{{Shape{3}}, {2, 3}}, Case{{Shape{}}, {2, 2}},
                     Case{{Shape{2, 3}}, {2, 3}, {}, 0.0, DS::full}, Case{{Shape{1}}, {0}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return generate(shape_of(c.args), [&](const Index& i) { return at_broadcast(x[0], i); });
                  })
                  .on_device(DS::forward_only));
  // args {dim}; index: the positions picked
  t.push_back(entry("index_select", op([](const auto& x, const Case& c) {
                      return heed::index_select(x[0], static_cast<int>(c.args[0]), index_on(c, x));
                    }),
                    {Case{{Shape{2, 3}}, {1}, ints({2, 0, 2, 2}, {4})}, Case{{Shape{2, 3}}, {0}, ints({1, 1}, {2})},
                     Case{{Shape{2, 3}}, {1}, ints({}, {0})}, Case{{Shape{4}}, {0}, ints({3, 0}, {2})},
                     // On a device: outer and inner rows both, and a row picked twice (backward adds).
                     Case{{Shape{2, 3, 4}}, {1}, ints({2, 0, 2}, {3})}, Case{{Shape{3, 2, 2}}, {-1}, ints({1}, {1})}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    Shape s = x[0].shape();
                    s[dim] = c.index.numel();
                    return generate(s, [&](const Index& i) {
                      Index j = i;
                      j[static_cast<std::size_t>(dim)] = c.index.data()[i[static_cast<std::size_t>(dim)]];
                      return at(x[0], j);
                    });
                  }));
  // args {dim}; every input joined
  t.push_back(entry("cat", op([](const auto& x, const Case& c) { return heed::cat(x, static_cast<int>(c.args[0])); }),
                    {Case{{Shape{2, 3}, Shape{2, 1}, Shape{2, 4}}, {1}}, Case{{Shape{2, 3}, Shape{1, 3}}, {0}},
                     Case{{Shape{2, 3}, Shape{0, 3}}, {0}}, Case{{Shape{2, 3}}, {-1}},
                     Case{{Shape{2, 0, 2}, Shape{2, 3, 2}, Shape{2, 1, 2}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return cat_ref(x, norm_dim(c.args[0], x[0].dim()));
                  }));
  t.push_back(entry("stack",
                    op([](const auto& x, const Case& c) { return heed::stack(x, static_cast<int>(c.args[0])); }),
                    {Case{{Shape{2, 3}, Shape{2, 3}}, {1}}, Case{{Shape{2, 3}, Shape{2, 3}, Shape{2, 3}}, {-1}},
                     Case{{Shape{}, Shape{}}, {0}}, Case{{Shape{0, 3}, Shape{0, 3}}, {0}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim() + 1);
                    Inputs<double> parts;
                    for (const Tensord& p : x) {
                      Shape s = p.shape();
                      s.insert(dim, 1);
                      parts.push_back(same_data(p, s));
                    }
                    return cat_ref(parts, dim);
                  }));
  // ---- shape ops of PyTorch's spelling: x.t(), x.mT(), x[i], flat repeat_interleave
  t.push_back(entry("t", op([](const auto& x, const Case&) { return x[0].t(); }),
                    {Case{{Shape{2, 3}}}, Case{{Shape{1, 4}}}, Case{{Shape{3}}}, Case{{Shape{}}}, Case{{Shape{0, 2}}}})
                  .reference([](const Inputs<double>& x, const Case&) {
                    return x[0].dim() == 2 ? permute_ref(x[0], {1, 0}) : x[0];
                  }));
  t.push_back(entry("mT", op([](const auto& x, const Case&) { return x[0].mT(); }),
                    {Case{{Shape{2, 3}}}, Case{{Shape{2, 3, 4}}}, Case{{Shape{2, 1, 3, 2}}}, Case{{Shape{4, 0, 2}}}})
                  .reference([](const Inputs<double>& x, const Case&) {
                    std::vector<int> dims(static_cast<std::size_t>(x[0].dim()));
                    for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
                    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
                    return permute_ref(x[0], dims);
                  }));
  // args {index}
  t.push_back(entry("operator[]", op([](const auto& x, const Case& c) { return x[0][c.args[0]]; }),
                    {Case{{Shape{3, 4}}, {1}}, Case{{Shape{3, 4}}, {-1}}, Case{{Shape{2, 3, 4}}, {0}},
                     Case{{Shape{3}}, {2}}, Case{{Shape{2, 0}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const index_t i = c.args[0] < 0 ? c.args[0] + x[0].shape()[0] : c.args[0];
                    Shape s = x[0].shape();
                    s.erase(0);
                    return same_data(slice_ref(x[0], 0, i, i + 1, 1), s);
                  }));
  // args {repeats}; of the flattened tensor. Forward only on the device, as repeat_interleave.
  t.push_back(entry("repeat_interleave_flat",
                    op([](const auto& x, const Case& c) { return x[0].repeat_interleave(c.args[0]); }),
                    {Case{{Shape{2, 3}}, {2}}, Case{{Shape{}}, {3}}, Case{{Shape{0, 3}}, {2}, {}, 0.0, DS::full},
                     Case{{Shape{2, 3}}, {1}, {}, 0.0, DS::full}, Case{{Shape{2, 3}}, {0}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    std::vector<double> out;
                    for (double v : x[0].to_vector()) out.insert(out.end(), static_cast<std::size_t>(c.args[0]), v);
                    return Tensord(out, Shape{static_cast<index_t>(out.size())});
                  })
                  .on_device(DS::forward_only));
  // ---- split and chunk: the piece args[1] (negative from the end) of the pieces along dim
  // args[0]. split: args[2] the split_size, or args[2...] (two or more) the sizes; chunk:
  // args[2] the number of chunks.
  t.push_back(entry("split", op([](const auto& x, const Case& c) {
                      const int dim = static_cast<int>(c.args[0]);
                      const auto pieces = c.args.size() == 3
                                              ? heed::split(x[0], c.args[2], dim)
                                              : x[0].split(std::vector<index_t>(c.args.begin() + 2, c.args.end()), dim);
                      return pieces.at(static_cast<std::size_t>(c.args[1] < 0 ? c.args[1] + std::int64_t(pieces.size())
                                                                              : c.args[1]));
                    }),
                    {Case{{Shape{5, 3}}, {0, 0, 2}}, Case{{Shape{5, 3}}, {0, -1, 2}}, Case{{Shape{2, 7}}, {1, 1, 3}},
                     Case{{Shape{2, 7}}, {-1, 2, 3}}, Case{{Shape{4, 3}}, {0, 0, 10}}, Case{{Shape{0, 3}}, {0, 0, 2}},
                     Case{{Shape{0, 3}}, {0, -1, 0}}, Case{{Shape{2, 6}}, {1, 1, 2, 0, 4}},
                     Case{{Shape{2, 6}}, {1, 2, 2, 0, 4}}, Case{{Shape{6}}, {0, -1, 1, 5}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const std::vector<index_t> sizes = c.args.size() == 3
                                                           ? even_pieces(x[0].shape()[dim], c.args[2])
                                                           : std::vector<index_t>(c.args.begin() + 2, c.args.end());
                    return piece_ref(x[0], dim, sizes, c.args[1]);
                  }));
  t.push_back(entry("chunk", op([](const auto& x, const Case& c) {
                      const auto pieces = heed::chunk(x[0], c.args[2], static_cast<int>(c.args[0]));
                      return pieces.at(static_cast<std::size_t>(c.args[1] < 0 ? c.args[1] + std::int64_t(pieces.size())
                                                                              : c.args[1]));
                    }),
                    {Case{{Shape{5, 3}}, {0, 0, 2}}, Case{{Shape{5, 3}}, {0, -1, 2}}, Case{{Shape{2, 6}}, {1, 2, 3}},
                     Case{{Shape{2, 6}}, {-1, -1, 4}}, Case{{Shape{2, 5}}, {1, -1, 4}}, Case{{Shape{3}}, {0, 2, 5}},
                     Case{{Shape{0, 3}}, {0, 2, 3}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t n = x[0].shape()[dim], chunks = c.args[2];
                    const std::vector<index_t> sizes = n == 0
                                                           ? std::vector<index_t>(static_cast<std::size_t>(chunks), 0)
                                                           : even_pieces(n, (n + chunks - 1) / chunks);
                    return piece_ref(x[0], dim, sizes, c.args[1]);
                  }));
  // ---- scatters into a slice: inputs x and src; slice_scatter args {dim, start, end,
  // step}, select_scatter args {dim, index}
  t.push_back(
      entry("slice_scatter", op([](const auto& x, const Case& c) {
              return heed::slice_scatter(x[0], x[1], static_cast<int>(c.args[0]), c.args[1], c.args[2], c.args[3]);
            }),
            {Case{{Shape{2, 3, 4}, Shape{2, 3, 2}}, {2, 0, 4, 2}},
             Case{{Shape{2, 3, 4}, Shape{2, 2, 4}}, {1, -2, 100, 1}}, Case{{Shape{2, 5}, Shape{2, 2}}, {1, 1, 5, 3}},
             Case{{Shape{6, 2}, Shape{3, 2}}, {0, 0, 6, 2}}, Case{{Shape{2, 3, 4}, Shape{2, 3, 1}}, {-1, -1, 4, 1}},
             Case{{Shape{2, 3, 4}, Shape{2, 0, 4}}, {1, 2, 1, 1}},
             Case{{Shape{2, 3, 4}, Shape{2, 3, 4}}, {2, -100, 100, 1}}, Case{{Shape{0, 3}, Shape{0, 2}}, {1, 0, 2, 1}}})
          .reference([](const Inputs<double>& x, const Case& c) {
            const int dim = norm_dim(c.args[0], x[0].dim());
            const index_t size = x[0].shape()[dim], start = clamp_bound(c.args[1], size),
                          end = clamp_bound(c.args[2], size), step = c.args[3];
            return generate(x[0].shape(), [&](const Index& i) {
              Index j = i;
              const index_t k = i[static_cast<std::size_t>(dim)];
              if (k < start || k >= end || (k - start) % step != 0) return at(x[0], i);
              j[static_cast<std::size_t>(dim)] = (k - start) / step;
              return at(x[1], j);
            });
          }));
  t.push_back(entry("select_scatter", op([](const auto& x, const Case& c) {
                      return heed::select_scatter(x[0], x[1], static_cast<int>(c.args[0]), c.args[1]);
                    }),
                    {Case{{Shape{2, 3, 4}, Shape{2, 4}}, {1, 2}}, Case{{Shape{2, 3, 4}, Shape{2, 3}}, {-1, -1}},
                     Case{{Shape{3}, Shape{}}, {0, 1}}, Case{{Shape{2, 0}, Shape{0}}, {0, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t at_index = c.args[1] < 0 ? c.args[1] + x[0].shape()[dim] : c.args[1];
                    return generate(x[0].shape(), [&](const Index& i) {
                      if (i[static_cast<std::size_t>(dim)] != at_index) return at(x[0], i);
                      Index j = i;
                      j.erase(j.begin() + dim);
                      return at(x[1], j);
                    });
                  }));
  // ---- gather, scatter_add, masked_select: args {dim}; index: the positions (repeated
  // where they add up), or the mask as 0/1
  t.push_back(entry("gather", op([](const auto& x, const Case& c) {
                      return heed::gather(x[0], static_cast<int>(c.args[0]), index_on(c, x));
                    }),
                    {Case{{Shape{3, 4}}, {1}, ints({3, 3, 0, 1, 2, 1}, {3, 2})},
                     Case{{Shape{3, 4}}, {0}, ints({2, 0, 1, 1, 0, 0, 2, 2}, {2, 4})},
                     Case{{Shape{3, 4}}, {1}, ints({0, 1, 2, 3, 3, 3}, {2, 3})},
                     Case{{Shape{2, 3, 4}}, {-1}, cycle(Shape{2, 3, 5}, 4)}, Case{{Shape{3, 4}}, {1}, ints({}, {3, 0})},
                     Case{{Shape{5}}, {0}, ints({4, 0, 4}, {3})}, Case{{Shape{}}, {0}, ints({0}, {})}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = x[0].dim() ? norm_dim(c.args[0], x[0].dim()) : 0;
                    return generate(c.index.shape(), [&](const Index& i) {
                      Index j = i;
                      if (!j.empty()) j[static_cast<std::size_t>(dim)] = c.index.data()[ravel(i, c.index.shape())];
                      return at(x[0], j);
                    });
                  })
                  .on_device(DS::none));
  t.push_back(entry("scatter_add", op([](const auto& x, const Case& c) {
                      return x[0].scatter_add(static_cast<int>(c.args[0]), index_on(c, x), x[1]);
                    }),
                    {Case{{Shape{3, 4}, Shape{3, 2}}, {1}, ints({0, 0, 3, 1, 2, 2}, {3, 2})},
                     Case{{Shape{3, 4}, Shape{2, 4}}, {0}, ints({0, 2, 2, 1, 0, 1, 2, 1}, {2, 4})},
                     Case{{Shape{3, 4}, Shape{3, 5}}, {1}, ints({1, 1, 1, 3, 0, 3}, {2, 3})},
                     Case{{Shape{2, 3, 4}, Shape{2, 3, 4}}, {-2}, cycle(Shape{2, 3, 4}, 3)},
                     Case{{Shape{2, 3}, Shape{2, 0}}, {1}, ints({}, {2, 0})},
                     Case{{Shape{4}, Shape{3}}, {0}, ints({1, 1, 1}, {3})}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    std::vector<double> out = x[0].to_vector();
                    for (index_t p = 0; p < c.index.numel(); ++p) {
                      const Index i = unravel(p, c.index.shape());
                      Index j = i;
                      j[static_cast<std::size_t>(dim)] = c.index.data()[p];
                      out[static_cast<std::size_t>(ravel(j, x[0].shape()))] += at(x[1], i);
                    }
                    return Tensord(out, x[0].shape());
                  })
                  .on_device(DS::none));
  // The mask is made on the CPU and moved, so that the device run reaches masked_select.
  t.push_back(
      entry("masked_select",
            op([](const auto& x, const Case& c) { return heed::masked_select(x[0], index_mask(c, x)); }),
            {Case{{Shape{2, 3}}, {}, ints({1, 0, 1, 0, 0, 1}, {2, 3})}, Case{{Shape{2, 3}}, {}, ints({0, 1, 1}, {3})},
             Case{{Shape{2, 1}}, {}, ints({1, 0, 1, 1, 1, 0}, {2, 3})}, Case{{Shape{2, 3}}, {}, ints({0, 1}, {2, 1})},
             Case{{Shape{}}, {}, ints({1, 0, 1}, {3})}, Case{{Shape{2, 3}}, {}, ints({0, 0, 0}, {3})},
             Case{{Shape{0, 3}}, {}, ints({1, 0, 1}, {3})}})
          .reference([](const Inputs<double>& x, const Case& c) {
            const Tensord mask = c.index.to<double>();
            const Shape s = broadcast(x[0].shape(), mask.shape());
            std::vector<double> out;
            for (index_t p = 0; p < s.numel(); ++p)
              if (at_broadcast(mask, unravel(p, s)) != 0) out.push_back(at_broadcast(x[0], unravel(p, s)));
            return Tensord(out, Shape{static_cast<index_t>(out.size())});
          })
          .on_device(DS::none));
  // ---- sort and topk: the values, differentiable (inputs without ties), and the indices
  // on integer inputs, where ties keep their order. sort: args {dim, descending}; topk:
  // args {k, dim, largest}.
  {
    const std::vector<Case> sort_cases = {Case{{Shape{2, 5}}, {-1, 0}},   Case{{Shape{2, 5}}, {1, 1}},
                                          Case{{Shape{3, 4, 2}}, {0, 0}}, Case{{Shape{3, 4, 2}}, {1, 1}},
                                          Case{{Shape{5}}, {0, 1}},       Case{{Shape{}}, {0, 0}},
                                          Case{{Shape{0, 3}}, {1, 0}},    Case{{Shape{2, 0}}, {1, 1}}};
    const std::vector<Case> topk_cases = {Case{{Shape{2, 5}}, {3, -1, 1}}, Case{{Shape{2, 5}}, {2, 1, 0}},
                                          Case{{Shape{4, 3}}, {4, 0, 1}},  Case{{Shape{4, 3}}, {0, 0, 1}},
                                          Case{{Shape{5}}, {1, 0, 0}},     Case{{Shape{3, 6, 2}}, {3, 1, 0}},
                                          Case{{Shape{}}, {1, 0, 1}},      Case{{Shape{0, 3}}, {2, 1, 1}}};
    const auto sort_ref = [](bool indices) {
      return [indices](const Inputs<double>& x, const Case& c) {
        const int dim = x[0].dim() ? norm_dim(c.args[0], x[0].dim()) : 0;
        return sorted_ref(x[0], dim, x[0].dim() ? x[0].shape()[dim] : 1, c.args[1] != 0, indices);
      };
    };
    const auto topk_ref = [](bool indices) {
      return [indices](const Inputs<double>& x, const Case& c) {
        const int dim = x[0].dim() ? norm_dim(c.args[1], x[0].dim()) : 0;
        return sorted_ref(x[0], dim, c.args[0], c.args[2] != 0, indices);
      };
    };
    t.push_back(entry("sort", op([](const auto& x, const Case& c) {
                        return heed::sort(x[0], static_cast<int>(c.args[0]), c.args[1] != 0).values;
                      }),
                      sort_cases)
                    .reference(sort_ref(false))
                    .on_device(DS::none));
    t.push_back(entry("argsort", op([](const auto& x, const Case& c) {
                        return as_values(x[0].argsort(static_cast<int>(c.args[0]), c.args[1] != 0), x[0]);
                      }),
                      sort_cases)
                    .reference(sort_ref(true))
                    .inputs({whole})
                    .not_differentiable()
                    .on_device(DS::none));
    t.push_back(entry("topk", op([](const auto& x, const Case& c) {
                        return x[0].topk(c.args[0], static_cast<int>(c.args[1]), c.args[2] != 0).values;
                      }),
                      topk_cases)
                    .reference(topk_ref(false))
                    .on_device(DS::none));
    t.push_back(entry("topk_indices", op([](const auto& x, const Case& c) {
                        return as_values(
                            heed::topk(x[0], c.args[0], static_cast<int>(c.args[1]), c.args[2] != 0).indices, x[0]);
                      }),
                      topk_cases)
                    .reference(topk_ref(true))
                    .inputs({whole})
                    .not_differentiable()
                    .on_device(DS::none));
  }
}

inline std::vector<Entry> make_table() {
  std::vector<Entry> t;
  add_math_entries(t);
  add_shape_and_model_entries(t);
  add_error_cases(t);
  add_golden_cases(t);
  return t;
}

/// The table, built once.
inline const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = make_table();
  return entries;
}

}  // namespace heed_test::op_table