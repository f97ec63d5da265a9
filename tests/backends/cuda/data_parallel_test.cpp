// Data-parallel training on the GPU with one rank (a lent machine has one GPU): the synchronised
// BatchNorm kernels against the CPU, and NCCL's sums (unique id through a host communicator of
// threads) in a trainer that must train as one without them.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/models/network_text.hpp>
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

TEST_CASE("cuda synchronised BatchNorm's calls take the input as a 16-bit step stores it", "[cuda][batchnorm][data-parallel][bf16]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(to_string(p));
    Backend& gpu = gpu_16bit(p);
    const Shape xs{8, 16, 8, 8}, cs{16}, two{32};
    const double count = static_cast<double>(xs.elements()) / xs[1] * 2;
    Twin x(gpu, xs, rounded16(p, random_values(xs.elements(), 91, -2.0f, 3.0f)));
    const Stored16 x16 = stored16(gpu, x.gpu());
    Twin gamma(gpu, cs, random_values(cs.elements(), 92, 0.5f, 1.5f)), beta(gpu, cs, 93);
    Twin running_mean(gpu, cs, 94), running_var(gpu, cs, random_values(cs.elements(), 95, 0.5f, 1.5f));
    Twin sums(gpu, cs, 96), squares(gpu, cs, 97), y(gpu, xs, 98);
    Stored16 y16 = stored16(gpu, y.gpu());
    cpu().batchnorm_channel_sums(x.cpu(), sums.cpu());
    cpu().batchnorm_centered_squares(x.cpu(), sums.cpu(), count, squares.cpu());
    cpu().batchnorm_forward_from_sums(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), running_mean.cpu(),
                                      running_var.cpu(), 0.1f, 1e-5f, count, sums.cpu(), squares.cpu());
    gpu.batchnorm_channel_sums(x16.alone, sums.gpu());
    gpu.batchnorm_centered_squares(x16.alone, sums.gpu(), count, squares.gpu());
    gpu.batchnorm_forward_from_sums(x16.alone, gamma.gpu(), beta.gpu(), y16.beside, running_mean.gpu(),
                                    running_var.gpu(), 0.1f, 1e-5f, count, sums.gpu(), squares.gpu());
    CHECK(sums.relative_error() <= 1e-5);
    CHECK(squares.relative_error() <= 1e-5);
    CHECK(running_var.relative_error() <= 1e-5);
    // The output in 16 bits: the CPU's float output rounded (half a unit in the last place: at
    // most 2^-8 of the largest value in bf16, 2^-11 in fp16).
    const std::vector<std::uint16_t> bits = bits_on_host(gpu, y16);
    std::vector<float> written(bits.size());
    cpu().from_16bit(bits.data(), Tensor{written.data(), Shape{static_cast<int>(written.size())}}, value_format(p));
    CHECK(relative_error(written, y.cpu_values()) <= (p == Precision::bf16 ? 4.5e-3 : 6e-4));

    Twin dy(gpu, xs, 99), backward_sums(gpu, two, 100), dx(gpu, xs, 101);
    cpu().batchnorm_backward_sums(x.cpu(), dy.cpu(), sums.cpu(), squares.cpu(), backward_sums.cpu());
    cpu().batchnorm_backward_from_sums(x.cpu(), dy.cpu(), gamma.cpu(), sums.cpu(), squares.cpu(),
                                       backward_sums.cpu(), count, dx.cpu(), false);
    gpu.batchnorm_backward_sums(x16.alone, dy.gpu(), sums.gpu(), squares.gpu(), backward_sums.gpu());
    gpu.batchnorm_backward_from_sums(x16.alone, dy.gpu(), gamma.gpu(), sums.gpu(), squares.gpu(),
                                     backward_sums.gpu(), count, dx.gpu(), false);
    CHECK(backward_sums.relative_error() <= 1e-5);
    CHECK(dx.relative_error() <= 1e-5);

    // A refused call leaves the sums it would turn into statistics in place as they were.
    const std::vector<float> sums_before = sums.gpu_values(), squares_before = squares.gpu_values();
    CHECK_THROWS_WITH(gpu.batchnorm_forward_from_sums(x16.alone, gamma.gpu(), Tensor{}, y16.beside, running_mean.gpu(),
                                                      running_var.gpu(), 0.1f, 1e-5f, count, sums.gpu(),
                                                      squares.gpu()),
                      Catch::Contains("batchnorm_forward_from_sums") &&
                          Catch::Contains("is not one value for each of [8x16x8x8]'s 16 channels"));
    CHECK(sums.gpu_values() == sums_before);
    CHECK(squares.gpu_values() == squares_before);
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
