// The measured convolution algorithms kept in a file (CudaOptions::algorithm_cache): a backend
// writes what it measured, every line of it reads back as a measurement, and a file that is not
// a cache is left as it was.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "backends/cuda/detail/conv_algorithms.hpp"
#include "backends/device/cuda_api.hpp"
#include "engine/plan/batch_planner.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;
namespace fs = std::filesystem;

namespace {

// Plans a network on images of a size no other test uses, so that this backend measures its
// convolutions itself.
void plan_unusual_shapes(Backend& backend, const Shape& image) {
  Network net = make_preset("resnet", image, 7);
  BatchPlanOptions o;
  o.batch = 5;
  const BatchPlanner planner(net, backend, o);
  CHECK(planner.breakdown(5).total() > 0);
}

}  // namespace

TEST_CASE("cuda measured algorithms are kept in the cache file and read back", "[cuda][algorithms]") {
  const fs::path path = fs::temp_directory_path() / ("cnn_algorithm_cache_test_" + std::to_string(::getpid()) + ".txt");
  fs::remove(path);
  {
    CudaOptions options;
    options.algorithm_cache = path.string();
    const std::unique_ptr<Backend> backend = make_cuda_backend(options);
    CHECK(backend->description().find("0 measured algorithm choices read from") != std::string::npos);
    plan_unusual_shapes(*backend, Shape{3, 19, 23});
  }  // written as it measured, and when the backend went
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == "cnnengine measured algorithms 1");
  std::map<std::string, std::string> lines;
  while (std::getline(in, line)) {
    const std::size_t first = line.find('\t'), second = line.find('\t', first + 1);
    REQUIRE(second != std::string::npos);
    lines[line.substr(first + 1, second - first - 1)] = line.substr(second + 1);
  }
  CHECK(lines.size() >= 3);  // a pass each, for each convolution shape
  // Under another device index every line reads back as a measurement.
  CHECK(cuda::import_measurements(99, lines) == static_cast<int>(lines.size()));

  // A later backend on the same file reads them (here: already known to the process).
  CudaOptions again;
  again.algorithm_cache = path.string();
  CHECK(make_cuda_backend(again)->description().find("measured algorithm choices read from") != std::string::npos);
  fs::remove(path);
}

TEST_CASE("cuda an algorithm cache path that is not a cache is left as it was", "[cuda][algorithms]") {
  const fs::path path = fs::temp_directory_path() / ("cnn_not_a_cache_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << "someone's notes\n";
  {
    CudaOptions options;
    options.algorithm_cache = path.string();
    const std::unique_ptr<Backend> backend = make_cuda_backend(options);
    CHECK(backend->description().find("algorithm cache not used") != std::string::npos);
    plan_unusual_shapes(*backend, Shape{3, 17, 21});  // measured here: a save is due, and refused
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "someone's notes\n");
  fs::remove(path);
}

// A line's last key field is the precision (0 fp32, 1 tf32, 2 bf16, 3 fp16), the one before it the
// layout (1 channels last); a choice's third field its cuDNN math type, and tensor-op math (1) is
// no fp32 choice. A line without the layout (written before it was a field) is skipped. Device
// 98: no other test's.
TEST_CASE("cuda cache lines read back by precision, tensor-op math never as fp32", "[cuda][algorithms][bf16]") {
  const std::string shape = "0 2 3 9 9 4 9 9 3 3 1 1 1 1 0 ";
  const std::string tensor_op_choice = "0 0 0|1 0 1 1 0.25";
  CHECK(cuda::import_measurements(98, {{shape + "2", tensor_op_choice}}) == 1);  // bf16
  CHECK(cuda::import_measurements(98, {{shape + "3", tensor_op_choice}}) == 1);  // fp16
  CHECK(cuda::import_measurements(98, {{shape + "1", tensor_op_choice}}) == 1);  // tf32
  CHECK(cuda::import_measurements(98, {{shape + "0", tensor_op_choice}}) == 0);  // fp32: refused
  CHECK(cuda::import_measurements(98, {{shape + "4", tensor_op_choice}}) == 0);  // no such precision
  CHECK(cuda::import_measurements(98, {{"0 2 3 9 9 4 9 9 3 3 1 1 1 1 1 2", tensor_op_choice}}) == 1);  // NHWC
  CHECK(cuda::import_measurements(98, {{"0 2 3 9 9 4 9 9 3 3 1 1 1 1 2 2", tensor_op_choice}}) == 0);  // no layout 2
  CHECK(cuda::import_measurements(98, {{"0 2 3 9 9 4 9 9 3 3 1 1 1 1 2", tensor_op_choice}}) == 0);  // no layout
}
