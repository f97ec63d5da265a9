#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "engine/checkpoint.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/presets.hpp"
#include "memory/host_resource.hpp"

using namespace cnn;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("cnn_checkpoint_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("weights round trip and bad files are refused by name", "[checkpoint]") {
  Scratch scratch;
  const fs::path file = scratch.dir / "w.bin";
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 8, 8}, 3);
  ParameterStore saved(net, backend, memory::host_resource(), 0, 1);
  save_weights(file, net, saved);
  CHECK_FALSE(fs::exists(scratch.dir / "w.bin.partial"));

  ParameterStore loaded(net, backend, memory::host_resource(), 0, 2);
  REQUIRE(loaded.download() != saved.download());
  load_weights(file, net, loaded);
  CHECK(loaded.download() == saved.download());

  SECTION("another network") {
    Network other = make_preset("small", Shape{1, 8, 8}, 3);
    ParameterStore p(other, backend, memory::host_resource(), 0, 1);
    CHECK(error_of([&] { load_weights(file, other, p); }).find("another network") != std::string::npos);
  }
  SECTION("truncated") {
    fs::resize_file(file, fs::file_size(file) - 10);
    const auto message = error_of([&] { load_weights(file, net, loaded); });
    CHECK(message.find("truncated") != std::string::npos);
    CHECK(message.find(file.string()) != std::string::npos);
  }
  SECTION("corrupt") {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
    f.close();
    CHECK(error_of([&] { load_weights(file, net, loaded); }).find("corrupt") != std::string::npos);
  }
  SECTION("not a checkpoint") {
    std::ofstream(file, std::ios::trunc) << "hello";
    CHECK(error_of([&] { load_weights(file, net, loaded); }).find("not a cnnengine weights file") != std::string::npos);
  }
  SECTION("a failed save leaves the previous file intact") {
    const auto before = fs::file_size(file);
    CHECK_THROWS(save_weights(scratch.dir / "missing-folder" / "w.bin", net, saved));
    CHECK(fs::file_size(file) == before);
    load_weights(file, net, loaded);
  }
}

TEST_CASE("running statistics are restored when a step is replayed", "[recovery]") {
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 8, 8}, 3);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  const auto before = params.download();
  params.save_state();
  // What a failed step's BatchNorm forward passes would leave behind.
  for (int id = 1; id < net.size(); ++id)
    for (const Tensor& t : params.params(id)) backend.fill(t, 3.f);
  params.restore_state();
  const auto after = params.download();
  // Trainable parameters are not part of the state (the optimizer never ran); the running
  // statistics are back.
  std::size_t restored = 0;
  for (std::size_t i = 0; i < before.size(); ++i)
    if (after[i] != 3.f) {
      CHECK(after[i] == before[i]);
      ++restored;
    }
  CHECK(restored > 0);
}
