#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/memory/host_resource.hpp"
#include "cnnengine/models/checkpoint.hpp"
#include "cnnengine/models/presets.hpp"
#include "data/data_test_files.hpp"

using namespace cnn;
namespace fs = std::filesystem;
namespace t = cnn::data::test;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Files in `dir` other than `keep`: temporary files left behind.
int others_in(const fs::path& dir, const fs::path& keep) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path() != keep;
  return n;
}

std::string save_path_error(const fs::path& path) {
  return error_of([&] { check_save_path(path); });
}

}  // namespace

TEST_CASE("weights round trip and bad files are refused by name", "[checkpoint]") {
  t::TempFolder scratch;
  const fs::path file = scratch / "w.bin";
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 8, 8}, 3);
  ParameterStore saved(net, backend, memory::host_resource(), 0, 1);
  save_weights(file, net, saved);
  CHECK(others_in(scratch.path(), file) == 0);  // no temporary file left

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
    CHECK_THROWS(save_weights(scratch / "missing-folder" / "w.bin", net, saved));
    CHECK(fs::file_size(file) == before);
    load_weights(file, net, loaded);
  }
}

TEST_CASE("weights holding NaN or infinity are never written, nor read", "[checkpoint]") {
  t::TempFolder scratch;
  const fs::path file = scratch / "w.bin";
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  save_weights(file, net, params);
  const std::vector<std::uint8_t> good = t::read_bytes(file);

  std::vector<float> values = params.download();
  values[7] = std::numeric_limits<float>::quiet_NaN();
  values[9] = std::numeric_limits<float>::infinity();
  params.upload(values);
  const std::string message = error_of([&] { save_weights(file, net, params); });
  CHECK(message.find("training diverged") != std::string::npos);
  CHECK(message.find(file.string() + " is unchanged") != std::string::npos);
  CHECK(t::read_bytes(file) == good);
  CHECK(others_in(scratch.path(), file) == 0);

  // A file written with NaN by an older build (checksum right) is refused on load.
  std::vector<std::uint8_t> bad = good;
  // The file: a header, the floats, their CRC-32.
  const std::size_t first_float = good.size() - values.size() * sizeof(float) - sizeof(std::uint32_t);
  std::memcpy(bad.data() + first_float + 7 * sizeof(float), &values[7], sizeof(float));
  const std::uint32_t crc = t::crc32({bad.begin() + first_float, bad.end() - sizeof(std::uint32_t)});
  std::memcpy(bad.data() + bad.size() - sizeof crc, &crc, sizeof crc);
  t::write_bytes(file, bad);
  CHECK(error_of([&] { load_weights(file, net, params); }).find("NaN or infinite") != std::string::npos);
}

TEST_CASE("the save path is checked before training, and a failed save leaves nothing behind", "[checkpoint]") {
  t::TempFolder scratch;
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);

  CHECK(save_path_error(scratch / "new.bin").empty());
  CHECK(others_in(scratch.path(), {}) == 0);  // the probe file is gone
  CHECK(save_path_error(scratch / "missing" / "w.bin").find("the folder " + (scratch / "missing").string() +
                                                                " does not exist") != std::string::npos);
  fs::create_directories(scratch / "adir");
  CHECK(save_path_error(scratch / "adir").find("it is a folder") != std::string::npos);
  REQUIRE(::mkfifo((scratch / "pipe").c_str(), 0600) == 0);
  CHECK(save_path_error(scratch / "pipe").find("it is a FIFO") != std::string::npos);
  CHECK(save_path_error("/dev/null").find("it is a device") != std::string::npos);

  SECTION("saving over a folder says so and removes its temporary file") {
    const std::string message = error_of([&] { save_weights(scratch / "adir", net, params); });
    CHECK(message.find("cannot replace " + (scratch / "adir").string()) != std::string::npos);
    CHECK(fs::is_directory(scratch / "adir"));
    CHECK(others_in(scratch.path(), scratch / "adir") == 1);  // the FIFO only
  }
  SECTION("loading a FIFO is refused at once (open() would block)") {
    CHECK(error_of([&] { load_weights(scratch / "pipe", net, params); }).find("it is a FIFO") != std::string::npos);
  }
  SECTION("the temporary file is this process's own") {
    // Another run's temporary file, under the old shared name or its own pid, is left alone.
    const std::vector<std::uint8_t> another_run = {'a', 'n', 'o', 't', 'h', 'e', 'r'};
    for (const char* name : {"w.bin.partial", "w.bin.partial.1"}) t::write_bytes(scratch / name, another_run);
    save_weights(scratch / "w.bin", net, params);
    for (const char* name : {"w.bin.partial", "w.bin.partial.1"}) CHECK(t::read_bytes(scratch / name) == another_run);
    load_weights(scratch / "w.bin", net, params);
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
