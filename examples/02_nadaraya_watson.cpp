// 02_nadaraya_watson — d2l 10.2: attention pooling as kernel regression.
//
// Fifty noisy samples of y = 2 sin x + x^0.8 are fitted twice: by non-parametric
// Nadaraya-Watson (each prediction a softmax-weighted average of the training targets,
// weights from a Gaussian kernel of the distance), and by NWKernelRegression, whose
// kernel width w is learnt with SGD (lr 0.5, 5 epochs, each training input attending
// to all the others).
//
//   nadaraya_watson [output_dir]     (default: the current directory)
//
// Prints the loss per epoch and writes four SVG files into output_dir: the fitted
// curves and the attention-weight heatmaps of both models.
#include <heed/heed.hpp>

#include <iostream>
#include <string>

using heed::Tensorf;

namespace {

void plot_fit(const heed::NadarayaWatsonData<float>& data, const Tensorf& y_hat, const std::string& path) {
  heed::Plot()
      .line(data.x_test, data.y_truth, "Truth")
      .line(data.x_test, y_hat, "Pred", "m--")
      .scatter(data.x_train, data.y_train, "Samples")
      .xlabel("x")
      .ylabel("y")
      .xlim(0, 5)
      .ylim(-1, 5)
      .save(path);
  std::cout << "wrote " << path << "\n";
}

void plot_weights(const Tensorf& attention_weights, const std::string& path) {
  // (n_test, n_train) -> d2l's (1, 1, n_test, n_train) grid of one panel.
  const heed::Shape s = attention_weights.shape();
  heed::show_heatmaps(attention_weights.reshape({1, 1, s[0], s[1]}), "Sorted training inputs", "Sorted testing inputs")
      .save(path);
  std::cout << "wrote " << path << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  heed::Generator gen(0);
  const auto data = heed::nadaraya_watson_data<float>(gen);
  const heed::index_t n_test = data.x_test.numel();

  // Non-parametric: nothing to learn.
  const auto [y_hat, attention_weights] = heed::nadaraya_watson(data.x_test, data.x_train, data.y_train);
  plot_fit(data, y_hat, out_dir + "/nw_nonparametric_fit.svg");
  plot_weights(attention_weights, out_dir + "/nw_nonparametric_weights.svg");

  // Parametric: training input i attends to the other n − 1 training inputs.
  const Tensorf keys = heed::leave_one_out(data.x_train), values = heed::leave_one_out(data.y_train);
  heed::NWKernelRegression<float> net(gen);
  heed::SGD<float> trainer(net.parameters(), 0.5);
  float first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 5; ++epoch) {
    trainer.zero_grad();
    const Tensorf l = (net(data.x_train, keys, values) - data.y_train).pow(2.f).sum();
    l.backward();
    trainer.step();
    last_loss = l.item();
    if (epoch == 0) first_loss = last_loss;
    std::cout << "epoch " << epoch + 1 << ", loss " << last_loss << "\n";
  }
  std::cout << "learnt w = " << net.w.item() << "\n";

  // Every test input attends to all training inputs.
  heed::NoGradGuard no_grad;
  const Tensorf y_hat_parametric =
      net(data.x_test, data.x_train.unsqueeze(0).repeat({n_test, 1}), data.y_train.unsqueeze(0).repeat({n_test, 1}));
  plot_fit(data, y_hat_parametric, out_dir + "/nw_parametric_fit.svg");
  plot_weights(net.attention_weights(), out_dir + "/nw_parametric_weights.svg");
  return last_loss < first_loss ? 0 : 1;  // CI runs this: training must lower the loss
}
