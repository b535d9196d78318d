// The program each packaging test builds: a user's first use of heed. Exits non-zero
// unless d/dw of mean((x·w − y)²) matches the value worked out by hand.
#include <heed/heed.hpp>

#if defined(HEED_CONSUMER_EXPECTS_COMPILED) && !defined(HEED_COMPILED)
#error "this consumer links heed::compiled, which defines HEED_COMPILED"
#endif
#if defined(HEED_CONSUMER_VERSION_MAJOR)
static_assert(HEED_VERSION_MAJOR == HEED_CONSUMER_VERSION_MAJOR && HEED_VERSION_MINOR == HEED_CONSUMER_VERSION_MINOR &&
                  HEED_VERSION_PATCH == HEED_CONSUMER_VERSION_PATCH,
              "heedConfigVersion.cmake disagrees with heed/version.hpp");
#endif

#include <cmath>
#include <iostream>

int main() {
  auto x = heed::tensor<float>({{1, 2}, {3, 4}});
  auto w = heed::tensor<float>({{0.5f}, {-1.f}}).requires_grad_();
  auto y = heed::tensor<float>({{1}, {0}});
  auto loss = (heed::matmul(x, w) - y).pow(2.f).mean();
  loss.backward();
  // residuals r = x·w − y = (−2.5, −2.5); dL/dw = xᵀ r · 2/2 = (−10, −15)
  const bool ok = std::fabs(loss.item() - 6.25f) < 1e-5f && std::fabs(w.grad().at({0, 0}) + 10.f) < 1e-5f &&
                  std::fabs(w.grad().at({1, 0}) + 15.f) < 1e-5f;
  std::cout << "loss " << loss << "\ngrad " << w.grad() << "\n" << (ok ? "ok" : "MISMATCH") << "\n";
  return ok ? 0 : 1;
}
