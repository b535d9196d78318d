// Calls every method Tensor declares: compiled after one public header that shows
// Tensor, so that a method declared but not defined by what the header brings in is an
// undefined symbol of the object file, which tests/link_check/check.cmake reports.
// Includes no heed header itself: it must see only what the header under test brought
// in. One element type is enough: whether a member's definition is visible does not
// depend on T, and each further type costs the check a third of its time.
#include <cstdint>
#include <vector>

namespace heed_link_check {

template <typename T>
void call_every_method() {
  using heed::Tensor;
  Tensor<T> x(std::vector<T>{1, 2, 3, 4, 5, 6}, heed::Shape{2, 3});
  Tensor<T> y = Tensor<T>::empty(heed::Shape{2, 3});
  const heed::Tensor<std::int64_t> index(std::vector<std::int64_t>{0, 1}, heed::Shape{2});
  (void)x.defined(), (void)x.shape(), (void)x.dim(), (void)x.size(0), (void)x.numel(), (void)x.dtype();
  (void)x.device(), (void)x.is_cuda(), (void)x.is_cpu(), (void)x.data(), (void)x.array();
  (void)x.matrix(2, 3), (void)x.at({0, 0}), (void)x.item(), (void)x.to_vector(), (void)x.is_same(y);
  (void)x.shares_storage(y), (void)x.requires_grad(), (void)x.is_leaf(), (void)x.grad(), (void)x.grad_fn_name();
  x.requires_grad_(false);
  x.zero_grad();
  x.backward();
  (void)x.detach(), (void)x.clone(), (void)x.to(heed::Device::cpu()), (void)x.template to<double>();
  x.fill_(T(1)).zero_().copy_(y).add_(y).sub_(y).mul_(T(2));
  (void)x.reshape(heed::Shape{3, 2}), (void)x.reshape({3, 2}), (void)x.view({6}), (void)x.flatten();
  (void)x.permute({1, 0}), (void)x.transpose(0, 1), (void)x.unsqueeze(0), (void)x.squeeze(), (void)x.squeeze(0);
  (void)x.narrow(0, 0, 1), (void)x.slice(0, 0, 1), (void)x.select(0, 0), (void)x.index_select(0, index);
  (void)x.repeat({1, 1}), (void)x.repeat_interleave(2, 0), (void)x.expand(heed::Shape{2, 3});
  (void)x.sum(), (void)x.sum(0), (void)x.mean(), (void)x.mean(0), (void)x.max(), (void)x.max(0), (void)x.argmax(0);
  (void)x.neg(), (void)x.exp(), (void)x.log(), (void)x.sqrt(), (void)x.tanh(), (void)x.sigmoid(), (void)x.relu();
  (void)x.gelu(), (void)x.silu(), (void)x.softplus(), (void)x.abs(), (void)x.sin(), (void)x.cos();
  (void)x.pow(T(2)), (void)x.pow(y);
  (void)x.softmax(1), (void)x.log_softmax(1), (void)x.matmul(y.transpose(0, 1));
}

template void call_every_method<float>();

}  // namespace heed_link_check
