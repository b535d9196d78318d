// The op table's entries for element-wise math, reductions, matrix products, the
// softmax family, layer_norm and dropout (see tests/op_table.hpp).
#pragma once

#include "op_table_references.hpp"

namespace heed_test::op_table {

/// clamp's bounds in the args: hundredths, or no_bound.
constexpr std::int64_t no_bound = 1000;
inline std::optional<double> bound(std::int64_t arg) {
  return arg == no_bound ? std::nullopt : std::optional<double>(static_cast<double>(arg) / 100);
}

template <typename U>
std::vector<double> doubles_of(const Tensor<U>& x) {
  return x.template to<double>().to_vector();
}

inline void add_math_entries(std::vector<Entry>& t) {
  using DS = DeviceSupport;
  // ---- elementwise: binary, with broadcasting
  t.push_back(binary(
      "add", [](const auto& a, const auto& b) { return heed::add(a, b); }, [](double a, double b) { return a + b; }));
  t.push_back(binary(
      "sub", [](const auto& a, const auto& b) { return heed::sub(a, b); }, [](double a, double b) { return a - b; }));
  t.push_back(binary(
      "mul", [](const auto& a, const auto& b) { return heed::mul(a, b); }, [](double a, double b) { return a * b; }));
  t.push_back(
      binary(
          "div", [](const auto& a, const auto& b) { return heed::div(a, b); }, [](double a, double b) { return a / b; })
          .inputs({Domain{}, positive}));
  t.push_back(binary(
                  "pow", [](const auto& a, const auto& b) { return heed::pow(a, b); },
                  [](double a, double b) { return std::pow(a, b); })
                  .inputs({positive, Domain{}})
                  .on_device(DS::none));
  // ---- elementwise: with a scalar
  t.push_back(entry("add_scalar",
                    op([](const auto& x, const Case& c) { return heed::add(x[0], scalar_as(x, c.scalar)); }),
                    unary_cases(2.5))
                  .reference(scalar_ref([](double v, double s) { return v + s; })));
  t.push_back(entry("mul_scalar",
                    op([](const auto& x, const Case& c) { return heed::mul(x[0], scalar_as(x, c.scalar)); }),
                    unary_cases(-1.5))
                  .reference(scalar_ref([](double v, double s) { return v * s; }))
                  .large(large_unary()));
  t.push_back(entry("rsub_scalar", op([](const auto& x, const Case& c) { return c.scalar - x[0]; }), unary_cases(2.0))
                  .reference(scalar_ref([](double v, double s) { return s - v; })));
  t.push_back(entry("div_scalar", op([](const auto& x, const Case& c) { return x[0] / c.scalar; }), unary_cases(4.0))
                  .reference(scalar_ref([](double v, double s) { return v / s; })));
  t.push_back(entry("rdiv_scalar", op([](const auto& x, const Case& c) { return c.scalar / x[0]; }),
                    unary_cases(3.0, DS::empty_on_cpu))
                  .reference(scalar_ref([](double v, double s) { return s / v; }))
                  .inputs({positive})
                  .on_device(DS::none));
  {
    std::vector<Case> cases = unary_cases(3.0, DS::empty_on_cpu);
    cases.push_back(Case{{Shape{2, 3}}, {}, {}, -0.5});
    cases.push_back(Case{{Shape{2, 3}}, {}, {}, 0.5});
    t.push_back(
        entry("pow_scalar", op([](const auto& x, const Case& c) { return x[0].pow(scalar_as(x, c.scalar)); }), cases)
            .reference(scalar_ref([](double v, double s) { return std::pow(v, s); }))
            .inputs({positive})
            .on_device(DS::none));
  }
  // ---- elementwise: unary
  t.push_back(unary(
      "neg", [](const auto& x) { return heed::neg(x); }, [](double v) { return -v; }));
  t.push_back(unary(
      "exp", [](const auto& x) { return heed::exp(x); }, [](double v) { return std::exp(v); }));
  t.push_back(unary(
                  "log", [](const auto& x) { return heed::log(x); }, [](double v) { return std::log(v); })
                  .inputs({positive}));
  t.push_back(unary(
                  "sqrt", [](const auto& x) { return heed::sqrt(x); }, [](double v) { return std::sqrt(v); })
                  .inputs({positive}));
  t.push_back(unary(
                  "tanh", [](const auto& x) { return heed::tanh(x); }, [](double v) { return std::tanh(v); })
                  .inputs({Domain{-2, 2}}));
  t.push_back(
      unary(
          "sigmoid", [](const auto& x) { return heed::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); })
          .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "relu", [](const auto& x) { return heed::relu(x); }, [](double v) { return v > 0 ? v : 0.0; })
                  .inputs({away}));
  t.push_back(unary(
                  "gelu", [](const auto& x) { return heed::gelu(x); },
                  [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "silu", [](const auto& x) { return heed::silu(x); }, [](double v) { return v / (1 + std::exp(-v)); })
                  .inputs({Domain{-3, 3}}));
  // Both sides of PyTorch's threshold (x > 20 gives x itself).
  t.push_back(unary(
                  "softplus", [](const auto& x) { return heed::softplus(x); },
                  [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); })
                  .inputs({Domain{-25, 25}}));
  t.push_back(unary(
                  "abs", [](const auto& x) { return heed::abs(x); }, [](double v) { return std::abs(v); })
                  .inputs({away}));
  t.push_back(unary(
                  "sin", [](const auto& x) { return heed::sin(x); }, [](double v) { return std::sin(v); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "cos", [](const auto& x) { return heed::cos(x); }, [](double v) { return std::cos(v); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
      "clone", [](const auto& x) { return heed::clone(x); }, [](double v) { return v; }));
  // ---- elementwise: comparisons (not differentiable) and selection
  t.push_back(binary(
                  "eq", [](const auto& a, const auto& b) { return as_values(heed::eq(a, b), a); },
                  [](double a, double b) { return a == b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "ne", [](const auto& a, const auto& b) { return as_values(heed::ne(a, b), a); },
                  [](double a, double b) { return a != b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "lt", [](const auto& a, const auto& b) { return as_values(heed::lt(a, b), a); },
                  [](double a, double b) { return a < b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "le", [](const auto& a, const auto& b) { return as_values(heed::le(a, b), a); },
                  [](double a, double b) { return a <= b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "gt", [](const auto& a, const auto& b) { return as_values(heed::gt(a, b), a); },
                  [](double a, double b) { return a > b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "ge", [](const auto& a, const auto& b) { return as_values(heed::ge(a, b), a); },
                  [](double a, double b) { return a >= b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(entry("gt_scalar", op([](const auto& x, const Case& c) { return as_values(x[0] > c.scalar, x[0]); }),
                    unary_cases(0.0))
                  .reference(scalar_ref([](double v, double s) { return v > s ? 1.0 : 0.0; }))
                  .inputs({whole})
                  .not_differentiable());
  // ---- elementwise: logical ops (not differentiable), nonzero read as true; whole
  // numbers in [-2, 2], so a quarter are 0. On bool masks: the goldens and test_ops.cpp.
  t.push_back(entry("logical_not",
                    op([](const auto& x, const Case&) { return as_values(heed::logical_not(x[0]), x[0]); }),
                    unary_cases(0.0))
                  .reference(unary_ref([](double v) { return v == 0 ? 1.0 : 0.0; }))
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "logical_and", [](const auto& a, const auto& b) { return as_values(heed::logical_and(a, b), a); },
                  [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "logical_or", [](const auto& a, const auto& b) { return as_values(heed::logical_or(a, b), a); },
                  [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  t.push_back(binary(
                  "logical_xor", [](const auto& a, const auto& b) { return as_values(heed::logical_xor(a, b), a); },
                  [](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable());
  {
    // index: the condition as 0/1, broadcast with a and b.
    const std::vector<Case> cases = {
        Case{{Shape{2, 3}, Shape{2, 3}}, {}, ints({1, 0, 1, 0, 0, 1}, {2, 3})},
        Case{{Shape{2, 1}, Shape{}}, {}, ints({1, 0, 1}, {3})},
        Case{{Shape{3}, Shape{2, 3}}, {}, ints({0, 1}, {2, 1})},
        Case{{Shape{0, 3}, Shape{3}}, {}, ints({}, {0, 3})},
    };
    t.push_back(entry("where",
                      op([](const auto& x, const Case& c) { return heed::where(index_mask(c, x), x[0], x[1]); }), cases)
                    .reference([](const Inputs<double>& x, const Case& c) {
                      const Tensord cond = c.index.to<double>();
                      return generate(
                          broadcast(broadcast(cond.shape(), x[0].shape()), x[1].shape()), [&](const Index& i) {
                            return at_broadcast(cond, i) != 0 ? at_broadcast(x[0], i) : at_broadcast(x[1], i);
                          });
                    }));
    const std::vector<Case> fill_cases = {
        Case{{Shape{2, 3}}, {}, ints({1, 0, 1, 0, 0, 1}, {2, 3}), -5.0},
        Case{{Shape{2, 3}}, {}, ints({1, 0, 1}, {3}), 0.0},
        Case{{Shape{2, 3}}, {}, ints({0, 1}, {2, 1}), 7.0},
        Case{{Shape{0, 3}}, {}, ints({1, 0, 1}, {3}), 1.0},
    };
    t.push_back(entry("masked_fill", op([](const auto& x, const Case& c) {
                        return heed::masked_fill(x[0], index_mask(c, x), scalar_as(x, c.scalar));
                      }),
                      fill_cases)
                    .reference([](const Inputs<double>& x, const Case& c) {
                      const Tensord cond = c.index.to<double>();
                      return generate(x[0].shape(), [&](const Index& i) {
                        return at_broadcast(cond, i) != 0 ? c.scalar : at(x[0], i);
                      });
                    }));
  }
  // args {min, max} in hundredths, no_bound where left out; a bound above the other
  // gives max everywhere. One bound alone through clamp_min and clamp_max.
  t.push_back(entry("clamp", op([](const auto& x, const Case& c) {
                      const std::optional<double> lo = bound(c.args[0]), hi = bound(c.args[1]);
                      if (!hi) return x[0].clamp_min(*lo);
                      if (!lo) return x[0].clamp_max(*hi);
                      return heed::clamp(x[0], lo, hi);
                    }),
                    {Case{{Shape{2, 3}}, {-25, no_bound}}, Case{{Shape{2, 3, 4}}, {no_bound, 50}},
                     Case{{Shape{2, 3, 4}}, {-25, 50}}, Case{{Shape{}}, {-25, 50}}, Case{{Shape{0, 3}}, {-25, 50}},
                     Case{{Shape{2, 3}}, {50, -25}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return generate(x[0].shape(), [&](const Index& i) {
                      double v = at(x[0], i);
                      if (c.args[0] != no_bound) v = std::max(v, static_cast<double>(c.args[0]) / 100);
                      if (c.args[1] != no_bound) v = std::min(v, static_cast<double>(c.args[1]) / 100);
                      return v;
                    });
                  }));
  t.push_back(entry("sequence_mask", op([](const auto& x, const Case& c) {
                      return heed::sequence_mask(x[0], index_on(c, x), c.scalar);
                    }),
                    {Case{{Shape{2, 4}}, {}, ints({1, 3}, {2}), 0.0},
                     Case{{Shape{3, 4, 2}}, {}, ints({0, 2, 5}, {3}), -1.0}, Case{{Shape{0, 3}}, {}, ints({}, {0})}})
                  .reference(sequence_mask_ref));
  // ---- reductions: args {} over everything, {dim, keepdim} over one dim
  {
    const std::vector<Case> cases = {Case{{Shape{2, 3, 4}}},
                                     Case{{Shape{2, 3, 4}}, {0, 0}},
                                     Case{{Shape{2, 3, 4}}, {1, 1}},
                                     Case{{Shape{2, 3, 4}}, {-1, 0}},
                                     Case{{Shape{2, 3, 4}}, {-1, 1}},
                                     Case{{Shape{2, 1, 3}}, {1, 0}},
                                     Case{{Shape{}}},
                                     Case{{Shape{}}, {0, 0}},
                                     Case{{Shape{0, 3}}, {1, 0}}};
    std::vector<Case> sum_cases = cases;
    sum_cases.push_back(Case{{Shape{0, 3}}});
    sum_cases.push_back(Case{{Shape{0, 3}}, {0, 1}});
    t.push_back(entry("sum", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::sum(x[0])
                                              : heed::sum(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      sum_cases)
                    .reference(reduce_ref(Reduce::sum))
                    .large({Case{{Shape{300, 400}}, {0, 0}}})
                    // a block per output, and one output per thread
                    .on_device_also({Case{{Shape{4000}}}, Case{{Shape{300, 3}}, {0, 0}}, Case{{Shape{7}}, {0, 0}}}));
    t.push_back(entry("mean", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::mean(x[0])
                                              : heed::mean(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::mean))
                    .on_device_also({Case{{Shape{3, 4, 5}}}, Case{{Shape{3, 4, 5}}, {2, 1}}}));
    t.push_back(entry("max", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::max(x[0])
                                              : heed::max(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::max)));
    t.push_back(entry("min", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::min(x[0])
                                              : heed::min(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::min)));
    // argmax and argmin over everything: the flat index, as a rank-0 tensor.
    t.push_back(entry("argmax", op([](const auto& x, const Case& c) {
                        return as_values(c.args.empty()
                                             ? heed::argmax(x[0])
                                             : heed::argmax(x[0], static_cast<int>(c.args[0]), c.args[1] != 0),
                                         x[0]);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::argmax))
                    .not_differentiable());
    t.push_back(entry("argmin", op([](const auto& x, const Case& c) {
                        return as_values(
                            c.args.empty() ? x[0].argmin() : x[0].argmin(static_cast<int>(c.args[0]), c.args[1] != 0),
                            x[0]);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::argmin))
                    .not_differentiable());
    // The values of torch.max(x, dim) and torch.min(x, dim); the indices checked by the property.
    std::vector<Case> dim_cases;
    for (const Case& c : cases)
      if (!c.args.empty()) dim_cases.push_back(c);
    for (const bool largest : {true, false}) {
      const auto extremes = [largest](const auto& x, const Case& c) {
        const int dim = static_cast<int>(c.args[0]);
        return largest ? heed::max_with_indices(x, dim, c.args[1] != 0)
                       : heed::min_with_indices(x, dim, c.args[1] != 0);
      };
      t.push_back(entry(largest ? "max_with_indices" : "min_with_indices",
                        op([extremes](const auto& x, const Case& c) { return extremes(x[0], c).values; }), dim_cases)
                      .reference(reduce_ref(largest ? Reduce::max : Reduce::min))
                      .property([extremes, largest](const Inputs<double>& x, const Case& c, const Tensord&) {
                        const auto [values, indices] = extremes(x[0], c);
                        CHECK(indices.shape() == values.shape());
                        CHECK(doubles_of(indices) ==
                              reduce_ref(largest ? Reduce::argmax : Reduce::argmin)(x, c).to_vector());
                      }));
    }
    // Multilinear: finite differences are exact, so zeros (and ties) in the inputs are fine.
    const auto prod_op = op([](const auto& x, const Case& c) {
      return c.args.empty() ? heed::prod(x[0]) : heed::prod(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
    });
    t.push_back(
        entry("prod", prod_op,
              {Case{{Shape{2, 3}}}, Case{{Shape{2, 3, 4}}, {1, 0}}, Case{{Shape{2, 3, 4}}, {-1, 1}}, Case{{Shape{}}},
               Case{{Shape{}}, {0, 1}}, Case{{Shape{0, 3}}}, Case{{Shape{0, 3}}, {0, 0}}, Case{{Shape{0, 3}}, {1, 1}}})
            .reference(reduce_ref(Reduce::prod))
            .inputs({Domain{0.5, 1.5, true}})
            .on_device(DS::none));
    t.push_back(entry("prod_with_zeros", prod_op,
                      {Case{{Shape{3, 4}}}, Case{{Shape{3, 4}}, {1, 0}}, Case{{Shape{4, 3}}, {0, 1}}})
                    .reference(reduce_ref(Reduce::prod))
                    .inputs({whole})
                    .on_device(DS::none));
  }
  // ---- reductions over a list of dims: args {keepdim, dims...}, no dims for every dim;
  // var and std: scalar the correction (std: args {keepdim, dim} the one-dim overload,
  // no args std(x))
  {
    const std::vector<Case> cases = {Case{{Shape{2, 3, 4}}, {0, 0, 2}},
                                     Case{{Shape{2, 3, 4}}, {1, -1, 0}},
                                     Case{{Shape{2, 3, 4}}, {0}},
                                     Case{{Shape{2, 3, 4}}, {1}},
                                     Case{{Shape{2, 3, 4}}, {0, 1}},
                                     Case{{Shape{2, 3, 4}}, {1, 2, 1, 0}},
                                     Case{{Shape{2, 1, 3}}, {0, -2, -1}},
                                     Case{{Shape{}}, {0, 0}},
                                     Case{{Shape{}}, {1}},
                                     Case{{Shape{2, 0, 3}}, {0, 0, 2}},
                                     Case{{Shape{0, 3}}, {0, 1}}};
    std::vector<Case> sum_cases = cases;
    sum_cases.push_back(Case{{Shape{0, 3}}, {1, 0}});
    sum_cases.push_back(Case{{Shape{0, 3}}, {0}});
    const auto dims = [](const Case& c) { return std::vector<int>(c.args.begin() + 1, c.args.end()); };
    t.push_back(entry("sum_dims",
                      op([dims](const auto& x, const Case& c) { return heed::sum(x[0], dims(c), c.args[0] != 0); }),
                      sum_cases)
                    .reference(reduce_dims_ref([](const std::vector<double>& v, const Case&) {
                      double s = 0;
                      for (double e : v) s += e;
                      return s;
                    }))
                    .large({Case{{Shape{300, 400}}, {0, 0}}}));
    t.push_back(entry("mean_dims",
                      op([dims](const auto& x, const Case& c) { return x[0].mean(dims(c), c.args[0] != 0); }), cases)
                    .reference(reduce_dims_ref([](const std::vector<double>& v, const Case&) {
                      double s = 0;
                      for (double e : v) s += e;
                      return s / static_cast<double>(v.size());
                    }))
                    .large({Case{{Shape{300, 400}}, {1, 1}}}));
    const Reference var_ref =
        reduce_dims_ref([](const std::vector<double>& v, const Case& c) { return variance(v, c.scalar); });
    t.push_back(entry("var", op([dims](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::var(x[0]) : heed::var(x[0], dims(c), c.args[0] != 0, c.scalar);
                      }),
                      {Case{{Shape{2, 3, 4}}, {}, {}, 1.0}, Case{{Shape{2, 3, 4}}, {0, 1}, {}, 1.0},
                       Case{{Shape{2, 3, 4}}, {1, -1}, {}, 0.0}, Case{{Shape{2, 3, 4}}, {0, 0, 2}, {}, 1.0},
                       Case{{Shape{2, 3, 4}}, {1, -1, 0}, {}, 0.0}, Case{{Shape{2, 3, 4}}, {0}, {}, 0.0},
                       Case{{Shape{2, 3, 4}}, {1, 1, 2}, {}, 2.0}, Case{{Shape{3, 1}}, {0, 1}, {}, 0.0},
                       Case{{Shape{}}, {0}, {}, 0.0}, Case{{Shape{0, 3}}, {0, 1}, {}, 1.0}})
                    .reference(var_ref)
                    .tolerance(1e-11)
                    .large({Case{{Shape{300, 400}}, {0, 0}, {}, 1.0}}));
    t.push_back(entry("std", op([dims](const auto& x, const Case& c) {
                        if (c.args.empty()) return x[0].std();
                        if (c.args.size() == 2)
                          return heed::std(x[0], static_cast<int>(c.args[1]), c.args[0] != 0, c.scalar);
                        return heed::std(x[0], dims(c), c.args[0] != 0, c.scalar);
                      }),
                      {Case{{Shape{2, 3, 4}}, {}, {}, 1.0}, Case{{Shape{2, 3, 4}}, {0, 1}, {}, 1.0},
                       Case{{Shape{2, 3, 4}}, {1, -1}, {}, 0.0}, Case{{Shape{2, 3, 4}}, {0, 0, 2}, {}, 1.0},
                       Case{{Shape{2, 3, 4}}, {1}, {}, 0.0}, Case{{Shape{2, 3, 4}}, {0, 2, 1}, {}, 2.0},
                       Case{{Shape{0, 3}}, {0, 1}, {}, 1.0}})
                    .reference([var_ref](const Inputs<double>& x, const Case& c) {
                      const Tensord v = var_ref(x, c);
                      return generate(v.shape(), [&](const Index& i) { return std::sqrt(at(v, i)); });
                    })
                    .tolerance(1e-11));
  }
  // ---- matrix products: args {transpose_a, transpose_b} where given
  t.push_back(entry("matmul", op([](const auto& x, const Case& c) {
                      return c.args.empty() ? heed::matmul(x[0], x[1])
                                            : heed::matmul(x[0], x[1], c.args[0] != 0, c.args[1] != 0);
                    }),
                    {Case{{Shape{4}, Shape{4}}}, Case{{Shape{3}, Shape{3, 4}}}, Case{{Shape{2, 3}, Shape{3}}},
                     Case{{Shape{2, 3}, Shape{3, 4}}}, Case{{Shape{2, 2, 3}, Shape{3, 4}}},
                     Case{{Shape{2, 2, 3}, Shape{2, 3, 2}}}, Case{{Shape{2, 1, 2, 3}, Shape{3, 3, 2}}},
                     Case{{Shape{2, 3}, Shape{2, 3, 2}}}, Case{{Shape{3}, Shape{2, 3, 2}}},
                     Case{{Shape{2, 2, 3}, Shape{3}}}, Case{{Shape{0, 3}, Shape{3, 4}}},
                     Case{{Shape{2, 0}, Shape{0, 4}}}, Case{{Shape{2, 3, 2}, Shape{3, 4}}, {1, 0}},
                     Case{{Shape{2, 3}, Shape{4, 3}}, {0, 1}}, Case{{Shape{2, 3, 2}, Shape{2, 4, 3}}, {1, 1}}})
                  .reference(matmul_ref())
                  .large({Case{{Shape{256, 256}, Shape{256, 256}}}})
                  .autocast(1e-2));
  t.push_back(entry("bmm", op([](const auto& x, const Case&) { return heed::bmm(x[0], x[1]); }),
                    {Case{{Shape{2, 2, 3}, Shape{2, 3, 4}}}, Case{{Shape{1, 1, 1}, Shape{1, 1, 1}}},
                     Case{{Shape{0, 2, 3}, Shape{0, 3, 4}}}, Case{{Shape{2, 0, 3}, Shape{2, 3, 4}}}})
                  .reference(matmul_ref())
                  .large({Case{{Shape{16, 64, 64}, Shape{16, 64, 64}}}})
                  .autocast(1e-2));
  t.push_back(entry("linear", op([](const auto& x, const Case&) {
                      return x.size() > 2 ? heed::linear(x[0], x[1], x[2]) : heed::linear(x[0], x[1]);
                    }),
                    {Case{{Shape{2, 3, 4}, Shape{5, 4}, Shape{5}}}, Case{{Shape{4}, Shape{2, 4}, Shape{2}}},
                     Case{{Shape{3, 4}, Shape{5, 4}}}, Case{{Shape{0, 4}, Shape{5, 4}, Shape{5}}}})
                  .reference(linear_ref)
                  // Several tiles of rows and features, a partial k group of int8's 4 and bf16's 2.
                  .large({Case{{Shape{13, 255}, Shape{150, 255}, Shape{150}}}})
                  .low_precision({{heed::Precision::bf16, 1e-2}, {heed::Precision::int8, 2e-2}})
                  .autocast(1e-2));
  // ---- softmax family: args {dim}
  {
    const std::vector<Case> cases = {Case{{Shape{2, 3, 4}}, {0}}, Case{{Shape{2, 3, 4}}, {1}},
                                     Case{{Shape{2, 3, 4}}, {2}}, Case{{Shape{2, 3, 4}}, {-1}},
                                     Case{{Shape{5}}, {0}},       Case{{Shape{}}, {0}},
                                     Case{{Shape{0, 3}}, {1}}};
    t.push_back(entry("softmax",
                      op([](const auto& x, const Case& c) { return heed::softmax(x[0], static_cast<int>(c.args[0])); }),
                      cases)
                    .reference(softmax_ref(false))
                    .inputs({Domain{-2, 2}})
                    .on_device_also({Case{{Shape{3, 40, 5}}, {1}}})
                    .large({Case{{Shape{1600, 64}}, {-1}}, Case{{Shape{64, 1600}}, {0}}}));
    t.push_back(entry("log_softmax", op([](const auto& x, const Case& c) {
                        return heed::log_softmax(x[0], static_cast<int>(c.args[0]));
                      }),
                      cases)
                    .reference(softmax_ref(true))
                    .inputs({Domain{-2, 2}})
                    .on_device_also({Case{{Shape{3, 40, 5}}, {1}}})
                    .large({Case{{Shape{1600, 64}}, {-1}}}));
  }
  // index: valid lengths (none, (batch), (batch, queries) or (batch, heads, queries));
  // args {causal, form}: form 1 reads the index as the allowed keys (0/1, (queries,
  // keys)), form 2 as well, with an additive mask of the keys (-inf on key 0) besides.
  // The device cases: rows of 1 to 1500 keys (the warp kernel's register sizes and the
  // block kernel), every mask form, a fully masked row in each valid-lengths case.
  std::vector<Case> softmax_device_cases;
  for (const index_t keys : {1, 7, 33, 100, 1000, 1500}) {
    const auto lens = [keys](const Shape& s) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(s.numel()));
      for (std::size_t i = 1; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i * 5 + 3) % (keys + 2);
      return ints(v, s);
    };
    std::vector<std::int64_t> allowed(static_cast<std::size_t>(4 * keys));
    for (std::size_t i = 0; i < allowed.size(); ++i) allowed[i] = (i * 7 + 1) % 3 != 0;
    const Shape s3{2, 4, keys}, s4{2, 3, 4, keys};
    for (const Case& c :
         {Case{{s3}}, Case{{s3}, {}, lens({2})}, Case{{s3}, {}, lens({2, 4})}, Case{{s4}, {}, lens({2})},
          Case{{s4}, {}, lens({2, 4})}, Case{{s4}, {}, lens({2, 3, 4})}, Case{{s4}, {0, 1}, ints(allowed, {4, keys})},
          Case{{s3}, {1}}, Case{{s4}, {1}, lens({2, 4})}, Case{{s4}, {0, 2}, ints(allowed, {4, keys})}})
      softmax_device_cases.push_back(c);
  }
  t.push_back(entry("masked_softmax", op([](const auto& x, const Case& c) {
                      using T = typename std::decay_t<decltype(x[0])>::value_type;
                      const std::int64_t form = c.args.size() > 1 ? c.args[1] : 0;
                      heed::AttentionMask<T> mask;
                      if (c.index.defined() && form == 0) mask.with_valid_lens(index_on(c, x));
                      if (c.index.defined() && form != 0) {
                        const heed::BoolTensor allowed = heed::ne(c.index, std::int64_t(0));
                        mask.with_allowed(x[0].defined() ? allowed.to(x[0].device()) : allowed);
                      }
                      if (form == 2) {
                        const index_t keys = c.index.shape()[1];
                        std::vector<T> additive(static_cast<std::size_t>(keys));
                        for (index_t j = 0; j < keys; ++j) additive[static_cast<std::size_t>(j)] = std::sin(T(j));
                        additive[0] = -std::numeric_limits<T>::infinity();
                        const Tensor<T> a(additive, Shape{1, keys});
                        mask.with_additive(x[0].defined() ? a.to(x[0].device()) : a);
                      }
                      mask.with_causal(!c.args.empty() && c.args[0] != 0);
                      return heed::masked_softmax(x[0], mask);
                    }),
                    {Case{{Shape{2, 3, 5}}}, Case{{Shape{2, 3, 5}}, {}, ints({2, 5}, {2})},
                     Case{{Shape{2, 3, 5}}, {}, ints({1, 0, 3, 5, 2, 4}, {2, 3})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({3, 1}, {2})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({1, 2, 3, 4, 0, 2}, {2, 3})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({1, 2, 3, 4, 0, 2, 3, 3, 1, 4, 4, 2}, {2, 2, 3})},
                     Case{{Shape{2, 3, 5}}, {1}}, Case{{Shape{1, 4, 4}}, {1}, ints({3}, {1})},
                     Case{{Shape{0, 3, 4}}, {}, ints({}, {0})}, Case{{Shape{2, 3, 0}}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return naive_masked_softmax(x[0], c.index, !c.args.empty() && c.args[0] != 0);
                  })
                  .inputs({Domain{-2, 2}})
                  .large({Case{{Shape{4, 400, 64}}, {}, ints({10, 64, 33, 0}, {4})}})
                  .on_device_also(softmax_device_cases));
  // args {normalized dims, 1 when the second input is the bias}; inputs x, then weight
  // and bias if given; scalar: eps if not 0
  t.push_back(
      entry("layer_norm", op([](const auto& x, const Case& c) {
              using X = std::decay_t<decltype(x[0])>;
              const bool bias_only = c.args.size() > 1 && c.args[1] != 0;
              const X weight = x.size() > 1 && !bias_only ? x[1] : X();
              const X bias = bias_only ? x[1] : x.size() > 2 ? x[2] : X();
              return heed::layer_norm(x[0], tail(c.shapes[0], c.args[0]), weight, bias, c.scalar > 0 ? c.scalar : 1e-5);
            }),
            {Case{{Shape{2, 3, 4}, Shape{4}, Shape{4}}, {1}}, Case{{Shape{2, 3, 4}, Shape{3, 4}, Shape{3, 4}}, {2}},
             Case{{Shape{3, 4}}, {1}}, Case{{Shape{3, 4}}, {2}}, Case{{Shape{3, 4}, Shape{4}}, {1}},
             Case{{Shape{4}, Shape{4}, Shape{4}}, {1}}, Case{{Shape{0, 4}, Shape{4}, Shape{4}}, {1}},
             Case{{Shape{3, 4}, Shape{3, 4}, Shape{3, 4}}, {2}}, Case{{Shape{3, 4}, Shape{4}}, {1, 1}},
             Case{{Shape{3, 4}, Shape{4}, Shape{4}}, {1}, {}, 0.5}})
          .reference(layer_norm_ref)
          .inputs({Domain{-2, 2}, Domain{0.5, 1.5}, Domain{}})
          .tolerance(1e-10)
          .large({Case{{Shape{1600, 64}, Shape{64}, Shape{64}}, {1}}})
          .on_device_also({Case{{Shape{3, 4, 10}, Shape{10}, Shape{10}}, {1}},
                           Case{{Shape{3, 4, 10}, Shape{4, 10}, Shape{4, 10}}, {2}}, Case{{Shape{5, 100}}, {1}},
                           Case{{Shape{2, 70}, Shape{70}}, {1}}}));
  // ---- dropout: args {p in %, training, seed of the generator}
  const auto dropout_op = op([](const auto& x, const Case& c) {
    heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
    return heed::dropout(x[0], static_cast<double>(c.args[0]) / 100.0, c.args[1] != 0, draws);
  });
  t.push_back(entry("dropout_p0", dropout_op,
                    {Case{{Shape{2, 3}}, {0, 1, 7}}, Case{{Shape{2, 3}}, {50, 0, 7}}, Case{{Shape{}}, {0, 1, 7}},
                     Case{{Shape{0, 3}}, {0, 1, 7}}})
                  .reference([](const Inputs<double>& x, const Case&) { return x[0]; }));
  t.push_back(
      entry("dropout", dropout_op,
            {Case{{Shape{2, 3, 4}}, {30, 1, 17}}, Case{{Shape{7}}, {50, 1, 18}}, Case{{Shape{}}, {50, 1, 19}},
             Case{{Shape{0, 3}}, {30, 1, 20}}, Case{{Shape{3, 40}}, {30, 1, 21}}, Case{{Shape{2, 5}}, {100, 1, 22}}})
          .inputs({away})
          .property(dropout_property)
          .on_device_also({Case{{Shape{2, 3, 4, 33}}, {30, 1, 17}}}));
}

}  // namespace heed_test::op_table
