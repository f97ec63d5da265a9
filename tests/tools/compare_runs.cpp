// compare_runs: two training runs of one network agree within a relative tolerance: the loss of
// every step (their --metrics-out files) and the trainable parameters (their checkpoints).
//
//   compare_runs A.jsonl A.ckpt B.jsonl B.ckpt RTOL
//
// A step's losses differ by at most RTOL of the first's; the parameters by at most RTOL of the
// largest parameter's magnitude (a relative error per element would be dominated by the
// parameters near zero). Prints the worst of each; exits 1 when either is over, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/cnnengine.hpp>

namespace {

std::vector<double> step_losses(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw cnn::DataError(file + ": cannot be read");
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") == "step") losses.push_back(j.at("loss").get<double>());
  }
  return losses;
}

// The trainable parameters of a saved run, in the store's order.
std::vector<float> trainable_parameters(const std::string& file, cnn::Backend& backend) {
  cnn::Model model(file, backend);
  const std::size_t count = model.parameters().trainable().elements();
  std::vector<float> values(count);
  model.parameters().download(cnn::ParameterStore::Block::parameters, 0, count, values.data());
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: compare_runs A.jsonl A.ckpt B.jsonl B.ckpt RTOL\n");
    return 2;
  }
  try {
    const double rtol = std::stod(argv[5]);
    const std::vector<double> a = step_losses(argv[1]), b = step_losses(argv[3]);
    if (a.empty() || a.size() != b.size()) {
      std::printf("FAILED: %zu steps against %zu\n", a.size(), b.size());
      return 1;
    }
    double worst_loss = 0;
    for (std::size_t s = 0; s < a.size(); ++s) worst_loss = std::max(worst_loss, std::abs(a[s] - b[s]) / std::abs(a[s]));

    cnn::CpuBackend backend(1);
    const std::vector<float> pa = trainable_parameters(argv[2], backend), pb = trainable_parameters(argv[4], backend);
    if (pa.size() != pb.size()) {
      std::printf("FAILED: %zu parameters against %zu\n", pa.size(), pb.size());
      return 1;
    }
    double largest = 0, worst_difference = 0;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      largest = std::max(largest, static_cast<double>(std::abs(pa[i])));
      worst_difference = std::max(worst_difference, static_cast<double>(std::abs(pa[i] - pb[i])));
    }
    const double worst_parameter = largest > 0 ? worst_difference / largest : worst_difference;
    std::printf("%zu steps: the losses differ by %.3g relative at most; %zu parameters differ by %.3g at most, %.3g of "
                "the largest (%.3g)\n",
                a.size(), worst_loss, pa.size(), worst_difference, worst_parameter, largest);
    if (worst_loss > rtol || worst_parameter > rtol) {
      std::printf("FAILED: over the tolerance %.3g\n", rtol);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_runs: %s\n", e.what());
    return 2;
  }
}
