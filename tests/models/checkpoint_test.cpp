#include <catch2/catch.hpp>
#include <cstdint>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "backends/cpu/cpu_backend.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/error_of.hpp"

using namespace cnn;
using cnn::testing::error_of;
namespace fs = std::filesystem;
namespace t = cnn::data::test;

namespace {

// Files in `dir` other than `keep`: temporary files left behind.
int others_in(const fs::path& dir, const fs::path& keep) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path() != keep;
  return n;
}

std::string save_path_error(const fs::path& path) {
  return error_of<CheckpointError>([&] { check_save_path(path); });
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
    CHECK(error_of<CheckpointError>([&] { load_weights(file, other, p); }).find("another network") != std::string::npos);
  }
  SECTION("truncated") {
    fs::resize_file(file, fs::file_size(file) - 10);
    const auto message = error_of<CheckpointError>([&] { load_weights(file, net, loaded); });
    CHECK(message.find("truncated") != std::string::npos);
    CHECK(message.find(file.string()) != std::string::npos);
  }
  SECTION("corrupt") {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
    f.close();
    CHECK(error_of<CheckpointError>([&] { load_weights(file, net, loaded); }).find("corrupt") != std::string::npos);
  }
  SECTION("not a checkpoint") {
    std::ofstream(file, std::ios::trunc) << "hello";
    CHECK(error_of<CheckpointError>([&] { load_weights(file, net, loaded); }).find("not a cnnengine weights file") != std::string::npos);
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
  const std::string message = error_of<CheckpointError>([&] { save_weights(file, net, params); });
  CHECK(message.find("training diverged") != std::string::npos);
  CHECK(message.find(file.string() + " is unchanged") != std::string::npos);
  CHECK(t::read_bytes(file) == good);
  CHECK(others_in(scratch.path(), file) == 0);

  // A file written with NaN by an older build (checksum right) is refused on load.
  std::vector<std::uint8_t> bad = good;
  // Weights only: a header, the description, the floats last, the CRC-32 of all before it.
  const std::size_t first_float = good.size() - values.size() * sizeof(float) - sizeof(std::uint32_t);
  std::memcpy(bad.data() + first_float + 7 * sizeof(float), &values[7], sizeof(float));
  const std::uint32_t crc = t::crc32({bad.begin(), bad.end() - sizeof(std::uint32_t)});
  std::memcpy(bad.data() + bad.size() - sizeof crc, &crc, sizeof crc);
  t::write_bytes(file, bad);
  CHECK(error_of<CheckpointError>([&] { load_weights(file, net, params); }).find("NaN or infinite") != std::string::npos);
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
    const std::string message = error_of<CheckpointError>([&] { save_weights(scratch / "adir", net, params); });
    CHECK(message.find("cannot replace " + (scratch / "adir").string()) != std::string::npos);
    CHECK(fs::is_directory(scratch / "adir"));
    CHECK(others_in(scratch.path(), scratch / "adir") == 1);  // the FIFO only
  }
  SECTION("saving over a FIFO is refused and leaves it a FIFO (a rename would put a file there)") {
    const std::string message = error_of<CheckpointError>([&] { save_weights(scratch / "pipe", net, params); });
    CHECK(message.find("cannot replace " + (scratch / "pipe").string() + ": it is a FIFO") != std::string::npos);
    CHECK(fs::is_fifo(scratch / "pipe"));
    CHECK(others_in(scratch.path(), scratch / "pipe") == 1);  // the folder only: no temporary left
  }
  SECTION("loading a FIFO is refused at once (open() would block)") {
    CHECK(error_of<CheckpointError>([&] { load_weights(scratch / "pipe", net, params); }).find("it is a FIFO") != std::string::npos);
  }
  SECTION("the temporary file is this process's own; a dead process's is removed") {
    // A running process's temporary file is left alone (pid 1 runs); one whose process is gone
    // (a save killed with -9) is removed by the next save in that folder.
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    REQUIRE(::waitpid(gone, nullptr, 0) == gone);
    const std::vector<std::uint8_t> another_run = {'a', 'n', 'o', 't', 'h', 'e', 'r'};
    const std::string running = ".cnnengine-1-0.partial", stale = ".cnnengine-" + std::to_string(gone) + "-3.partial";
    for (const std::string& name : {running, stale, std::string("w.bin.partial.1")}) t::write_bytes(scratch / name, another_run);
    save_weights(scratch / "w.bin", net, params);
    CHECK(t::read_bytes(scratch / running) == another_run);
    CHECK(t::read_bytes(scratch / "w.bin.partial.1") == another_run);
    CHECK_FALSE(fs::exists(scratch / stale));
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

namespace {
// A file of version 1 (weights only), as the engine wrote them before checkpoints held more.
void write_version_1(const fs::path& path, const std::vector<float>& values, std::uint32_t fingerprint) {
  std::vector<std::uint8_t> bytes(24);
  std::memcpy(bytes.data(), "CNNWEIGH", 8);
  const std::uint32_t version = 1;
  const std::uint64_t floats = values.size();
  std::memcpy(bytes.data() + 8, &version, 4);
  std::memcpy(bytes.data() + 12, &fingerprint, 4);
  std::memcpy(bytes.data() + 16, &floats, 8);
  std::vector<std::uint8_t> data(values.size() * sizeof(float));
  std::memcpy(data.data(), values.data(), data.size());
  const std::uint32_t crc = t::crc32(data);
  bytes.insert(bytes.end(), data.begin(), data.end());
  bytes.resize(bytes.size() + 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  t::write_bytes(path, bytes);
}
}  // namespace

TEST_CASE("a checkpoint holds the model, the optimizer state and the run's position", "[checkpoint]") {
  t::TempFolder scratch;
  const fs::path file = scratch / "run.ckpt";
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 8, 8}, 3);
  ParameterStore saved(net, backend, memory::host_resource(), 2, 1);
  std::vector<float> state(saved.floats(ParameterStore::Block::optimizer_state));
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = 0.25f * static_cast<float>(i % 17);
  saved.upload(ParameterStore::Block::optimizer_state, 0, state.size(), state.data());

  ModelDescription model = describe_model(net);
  model.class_names = {"cat", "dog", "eel"};
  model.preprocessing.normalization = {{0.5f}, {0.25f}};
  TrainingCheckpoint training;
  training.trainer = {37, 16, 5, 0.5f};
  training.progress.epoch = 3;
  training.progress.batches_done = 7;
  training.progress.loss_sum = 1.0 / 3.0;
  training.progress.correct = 12;
  training.progress.seen = 448;
  training.progress.steps = {{2.5f, 0.1f, 1e-3f}, {2.25f, 0.2f, 9e-4f}};
  training.progress.epochs = {{1, 2.0, 0.3, 1.5, 0.4, 3.5, 1000.0, 1.25, 0.625, 1e-3},
                              {2, 1.5, 0.5, std::nullopt, std::nullopt, 3.0, 900.0}};
  training.settings = R"({"lr": 0.001})";
  save_checkpoint(file, net, saved, model, &training);

  const CheckpointInfo info = read_checkpoint(file);
  CHECK(info.version == kCheckpointVersion);
  CHECK(info.model.network == network_text(net));
  CHECK(info.model.input == (Shape{1, 8, 8}));
  CHECK(info.model.class_names == model.class_names);
  CHECK(info.model.preprocessing.normalization.mean == model.preprocessing.normalization.mean);
  CHECK(info.model.preprocessing.normalization.stddev == model.preprocessing.normalization.stddev);
  REQUIRE(info.training);
  CHECK(info.training->trainer.steps == 37);
  CHECK(info.training->trainer.micro_batch == 16);
  CHECK(info.training->trainer.good_steps == 5);
  CHECK(info.training->trainer.learning_rate_scale == 0.5f);
  const RunProgress& p = info.training->progress;
  CHECK(p.epoch == 3);
  CHECK(p.batches_done == 7);
  CHECK(p.loss_sum == 1.0 / 3.0);  // to the bit: a resumed epoch reports what it would have
  CHECK(p.seen == 448);
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[1].loss == 2.25f);
  CHECK(p.steps[1].learning_rate == 9e-4f);
  REQUIRE(p.epochs.size() == 2);
  CHECK(p.epochs[0].test_accuracy == 0.4);
  CHECK_FALSE(p.epochs[1].test_loss);
  CHECK(p.epochs[0].validation_loss == 1.25);
  CHECK(p.epochs[0].validation_accuracy == 0.625);
  CHECK(p.epochs[0].learning_rate == 1e-3);
  CHECK_FALSE(p.epochs[1].validation_accuracy);
  CHECK(info.training->settings == training.settings);

  ParameterStore loaded(net, backend, memory::host_resource(), 2, 2);
  load_parameters(file, net, loaded, true);
  CHECK(loaded.download() == saved.download());
  std::vector<float> state_back(state.size());
  loaded.download(ParameterStore::Block::optimizer_state, 0, state_back.size(), state_back.data());
  CHECK(state_back == state);

  SECTION("weights only: no optimizer state to continue from") {
    save_weights(file, net, saved);
    CHECK_FALSE(read_checkpoint(file).training);
    CHECK(error_of<CheckpointError>([&] { load_parameters(file, net, loaded, true); }).find("a file of weights only") != std::string::npos);
  }
  SECTION("bytes after the checksum are refused, and the file is left as it was") {
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    bytes.push_back(0);
    t::write_bytes(file, bytes);
    CHECK(error_of<CheckpointError>([&] { read_checkpoint(file); }).find("1 bytes after its checksum") != std::string::npos);
    CHECK(t::read_bytes(file) == bytes);
  }
  SECTION("a newer version says so") {
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    const std::uint32_t newer = kCheckpointVersion + 1;
    std::memcpy(bytes.data() + 8, &newer, sizeof newer);
    t::write_bytes(file, bytes);
    CHECK(error_of<CheckpointError>([&] { read_checkpoint(file); }).find("is newer than this cnnengine reads") != std::string::npos);
  }
  SECTION("a description that does not parse is corrupt, not a crash") {
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    bytes[24] = '[';
    const std::uint32_t crc = t::crc32({bytes.begin(), bytes.end() - 4});
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
    t::write_bytes(file, bytes);
    CHECK(error_of<CheckpointError>([&] { read_checkpoint(file); }).find("corrupt (its description cannot be read") != std::string::npos);
  }
}

TEST_CASE("weights files of version 1 still load", "[checkpoint]") {
  t::TempFolder scratch;
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  ParameterStore saved(net, backend, memory::host_resource(), 0, 1), loaded(net, backend, memory::host_resource(), 0, 2);
  // The fingerprint is the one version 2 records too.
  save_weights(scratch / "v2.bin", net, saved);
  const std::vector<std::uint8_t> v2 = t::read_bytes(scratch / "v2.bin");
  const std::string text(v2.begin() + 24, v2.end());
  const auto at = text.find("\"fingerprint\":") + 14;
  const auto fingerprint = static_cast<std::uint32_t>(std::stoul(text.substr(at)));
  write_version_1(scratch / "v1.bin", saved.download(), fingerprint);
  load_weights(scratch / "v1.bin", net, loaded);
  CHECK(loaded.download() == saved.download());
  CHECK(read_checkpoint(scratch / "v1.bin").version == 1);
  std::vector<std::uint8_t> v1 = t::read_bytes(scratch / "v1.bin");
  v1.push_back(7);
  t::write_bytes(scratch / "v1.bin", v1);
  CHECK(error_of<CheckpointError>([&] { load_weights(scratch / "v1.bin", net, loaded); }).find("after its checksum") != std::string::npos);
}

TEST_CASE("saving through a symbolic link writes the file it names, a name near the limit works", "[checkpoint]") {
  t::TempFolder scratch;
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  fs::create_directories(scratch / "real");
  fs::create_symlink(scratch / "real" / "w.ckpt", scratch / "link.ckpt");
  save_weights(scratch / "link.ckpt", net, params);
  CHECK(fs::is_symlink(scratch / "link.ckpt"));
  CHECK(is_checkpoint(scratch / "real" / "w.ckpt"));
  save_weights(scratch / "link.ckpt", net, params);  // again, over the file the link names
  CHECK(fs::is_symlink(scratch / "link.ckpt"));

  const std::string longest(255, 'w');  // NAME_MAX on Linux file systems
  check_save_path(scratch / longest);
  save_weights(scratch / longest, net, params);
  load_weights(scratch / longest, net, params);
  CHECK(others_in(scratch.path(), scratch / longest) == 2);  // the folder and the link
}

TEST_CASE("saving over a file that is not a checkpoint is refused unless asked", "[checkpoint]") {
  t::TempFolder scratch;
  std::ofstream(scratch / "notes.txt") << "precious";
  CHECK(save_path_error(scratch / "notes.txt").find("is not a cnnengine checkpoint") != std::string::npos);
  CHECK(error_of<CheckpointError>([&] { check_save_path(scratch / "notes.txt", true); }).empty());
  CHECK(t::read_bytes(scratch / "notes.txt").size() == 8);
}

TEST_CASE("fine-tuning: the layers that match load from another network's weights, the rest keep theirs",
          "[checkpoint]") {
  t::TempFolder scratch;
  const fs::path file = scratch / "ten.ckpt";
  CpuBackend backend(1);
  Network ten = make_preset("small-bn", Shape{1, 8, 8}, 10);
  ParameterStore trained(ten, backend, memory::host_resource(), 2, 1);
  std::vector<float> values = trained.download();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i % 997);
  trained.upload(values);
  save_weights(file, ten, trained);

  Network three = make_preset("small-bn", Shape{1, 8, 8}, 3);  // a new head: dense 10 becomes dense 3
  ParameterStore fresh(three, backend, memory::host_resource(), 2, 7);
  const std::vector<float> initialised = fresh.download();
  CHECK_THROWS_WITH(load_weights(file, three, fresh), Catch::Contains("load_matching_weights takes the layers"));
  const WeightTransfer transfer = load_matching_weights(file, three, fresh);
  REQUIRE(transfer.kept.size() == 1);
  CHECK(transfer.kept[0].find("dense 3") != std::string::npos);
  CHECK(transfer.loaded.size() >= 4);  // the convolutions, the BatchNorms, the first dense

  const std::vector<float> after = fresh.download();
  const auto theirs = ParameterStore::places(ten), ours = ParameterStore::places(three);
  REQUIRE(theirs.size() == ours.size());
  const int head = three.size() - 1;
  for (std::size_t k = 0; k < ours.size(); ++k) {
    INFO("node " << ours[k].node << " " << ours[k].name);
    for (std::size_t i = 0; i < ours[k].shape.elements(); i += 7) {
      if (ours[k].node == head)
        CHECK(after[ours[k].offset + i] == initialised[ours[k].offset + i]);  // kept its initialisation
      else
        CHECK(after[ours[k].offset + i] == values[theirs[k].offset + i]);  // BatchNorm's statistics too
    }
  }
}

TEST_CASE("a checkpoint records how its images are framed, and a framing the input does not fit is corrupt", "[checkpoint]") {
  t::TempFolder dir;
  CpuBackend backend(1);
  const Network net = parse_network("conv 2 3 pad=1\nglobalavgpool\nflatten\ndense 3\n", Shape{3, 12, 12}, 3);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  ModelDescription model = describe_model(net);
  model.preprocessing.resize_shorter_side = 14;
  model.preprocessing.normalization = data::imagenet_normalization();
  save_checkpoint(dir / "framed.ckpt", net, params, model);
  const CheckpointInfo info = read_checkpoint(dir / "framed.ckpt");
  CHECK(info.model.preprocessing.resize_shorter_side == 14);
  CHECK(info.model.preprocessing.normalization.mean == data::imagenet_normalization().mean);

  model.preprocessing.resize_shorter_side = 10;  // under the 12x12 crop
  save_checkpoint(dir / "crop_outside.ckpt", net, params, model);
  CHECK_THAT(error_of<CheckpointError>([&] { read_checkpoint(dir / "crop_outside.ckpt"); }),
             Catch::Contains("crop_outside.ckpt: corrupt (its preprocessing: resizing the shorter side to 10"));

  model.preprocessing.resize_shorter_side = 0;  // stretched: written as the files before framing were
  save_checkpoint(dir / "stretched.ckpt", net, params, model);
  CHECK(read_checkpoint(dir / "stretched.ckpt").model.preprocessing.resize_shorter_side == 0);
  const std::vector<std::uint8_t> bytes = t::read_bytes(dir / "stretched.ckpt");
  CHECK(std::string(bytes.begin(), bytes.end()).find("resize_shorter_side") == std::string::npos);
}
