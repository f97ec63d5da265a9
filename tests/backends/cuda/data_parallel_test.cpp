// Data-parallel training on the GPU with one rank (a lent machine has one GPU): the synchronised
// BatchNorm kernels against the CPU, and NCCL's sums (unique id through a host communicator of
// threads) in a trainer that must train as one without them.
#include <catch2/catch.hpp>
#include <cmath>

#include "backends/device/device.hpp"
#include "engine/train/trainer.hpp"
#include "models/network_text.hpp"
#include "support.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/engine/thread_ranks.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

TEST_CASE("cuda synchronised BatchNorm's calls match the CPU", "[cuda][batchnorm][data-parallel]") {
  for (const Shape xs : {Shape{8, 16, 7, 9}, Shape{32, 10}}) {
    INFO("input " << xs.str());
    const Shape cs{xs[1]}, two{2 * xs[1]};
    const double count = static_cast<double>(xs.elements()) / xs[1] * 2;  // as if two ranks held the same
    Twin x(gpu(), xs, random_values(xs.elements(), 61, -2.0f, 3.0f));
    Twin gamma(gpu(), cs, random_values(cs.elements(), 62, 0.5f, 1.5f)), beta(gpu(), cs, 63);
    Twin running_mean(gpu(), cs, 64), running_var(gpu(), cs, random_values(cs.elements(), 65, 0.5f, 1.5f));
    Twin sums(gpu(), cs, 66), squares(gpu(), cs, 67), y(gpu(), xs, 68);
    for (Backend* b : {&cpu(), &gpu()}) {
      const bool on_gpu = b == &gpu();
      auto t = [&](const Twin& twin) { return on_gpu ? twin.gpu() : twin.cpu(); };
      b->batchnorm_channel_sums(t(x), t(sums));
      b->batchnorm_centered_squares(t(x), t(sums), count, t(squares));
      b->batchnorm_forward_from_sums(t(x), t(gamma), t(beta), t(y), t(running_mean), t(running_var), 0.1f, 1e-5f,
                                     count, t(sums), t(squares));
    }
    CHECK(sums.relative_error() <= 1e-5);     // now the mean
    CHECK(squares.relative_error() <= 1e-5);  // now 1 / sqrt(var + eps)
    CHECK(y.relative_error() <= 1e-5);
    CHECK(running_mean.relative_error() <= 1e-5);
    CHECK(running_var.relative_error() <= 1e-5);

    Twin dy(gpu(), xs, 69), backward_sums(gpu(), two, 70);
    for (bool accumulate : {false, true}) {
      Twin dx(gpu(), xs, 71);
      for (Backend* b : {&cpu(), &gpu()}) {
        const bool on_gpu = b == &gpu();
        auto t = [&](const Twin& twin) { return on_gpu ? twin.gpu() : twin.cpu(); };
        b->batchnorm_backward_sums(t(x), t(dy), t(sums), t(squares), t(backward_sums));
        b->batchnorm_backward_from_sums(t(x), t(dy), t(gamma), t(sums), t(squares), t(backward_sums), count, t(dx),
                                        accumulate);
      }
      CHECK(backward_sums.relative_error() <= 1e-5);
      CHECK(dx.relative_error() <= 1e-5);
    }
  }
}

TEST_CASE("cuda NCCL over one rank: sums in place, and a trainer that trains as one without it",
          "[cuda][data-parallel]") {
#if !CNN_TEST_HAVE_NCCL
  WARN("skipped: this build has no NCCL (nccl.h and libnccl.so.2 were found neither in the CUDA toolkit nor in "
       "python3's nvidia-nccl wheel when it was configured; set NCCL_ROOT)");
  return;
#endif
  cnn::testing::ThreadRanks host(1);
  const std::unique_ptr<Communicator> nccl = make_device_communicator(gpu(), host.rank(0));
  REQUIRE(nccl);
  CHECK(nccl->memory_kind() == DeviceKind::cuda);
  CHECK(nccl->describe().find("NCCL") != std::string::npos);

  Twin values(gpu(), Shape{1000}, 81);
  nccl->sum(values.gpu());  // one rank: the values themselves
  nccl->start_sum(values.gpu());
  nccl->wait_started();
  CHECK(values.relative_error() == 0);

  const Shape image{1, 28, 28};
  const cnn::testing::SyntheticData data(64 * 5, image, 10, 19);
  for (const bool sync : {false, true}) {
    INFO("synchronised BatchNorm " << sync);
    std::vector<double> alone, over_nccl;
    std::vector<float> params_alone, params_nccl;
    for (const bool with_nccl : {false, true}) {
      Network net = make_preset("small-bn", image, 10);
      TrainerOptions o = cnn::testing::constant_sgd(64);
      if (with_nccl) {
        o.communicator = nccl.get();
        o.sync_batchnorm = sync;
      }
      Trainer trainer(net, gpu(), gpu().device_memory(), o);
      for (int s = 0; s < 5; ++s) {
        Batch b = data.batch(s * 64, 64);
        if (with_nccl) b.global_size = 64;
        (with_nccl ? over_nccl : alone).push_back(trainer.train_step(b).loss);
      }
      (with_nccl ? params_nccl : params_alone) = trainer.parameters().download();
    }
    for (std::size_t s = 0; s < alone.size(); ++s) CHECK(std::abs(alone[s] - over_nccl[s]) <= 1e-5 * alone[s]);
    CHECK(cnn::testing::relative_error(params_nccl, params_alone) <= 1e-5);
  }
}
