// A saved network started on data of other classes: its final dense layer replaced (the options
// it was written with kept), the rest as saved; the layers before the head take the file's
// weights. A network whose head cannot change its classes is refused naming its last layer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/fine_tuning.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/error_of.hpp"

using namespace cnn;
using cnn::testing::error_of;
using Catch::Matchers::Contains;

namespace {

// `text` on [1x12x12] samples saved with weights; the file and what read_checkpoint says of it.
struct Saved {
  data::test::TempFolder scratch;
  std::filesystem::path file = scratch / "saved.ckpt";
  CheckpointInfo info;
  Saved(const std::string& text, int classes, Task task = Task::classify) {
    CpuBackend backend(1);
    Network net = parse_network(text, Shape{1, 12, 12}, classes);
    LossOptions loss;
    loss.task = task;
    net.set_loss(loss);
    ParameterStore params(net, backend, memory::host_resource(), 0, 7);
    save_checkpoint(file, net, params, describe_model(net));
    info = read_checkpoint(file);
  }
};

}  // namespace

TEST_CASE("fine-tuning replaces a saved network's dense head for other classes, its options kept", "[checkpoint]") {
  Saved saved("conv 4 3 pad=1 as=stem\nrelu\nconv 4 3 pad=1\nadd stem\nglobalavgpool\nflatten\ndense 7 bias=0\n", 7);

  const FineTuningNetwork same = network_for_fine_tuning(saved.info, saved.file, 7);
  CHECK(same.new_head.empty());
  CHECK(network_text(same.network) == saved.info.model.network);

  const FineTuningNetwork tuned = network_for_fine_tuning(saved.info, saved.file, 3);
  CHECK(tuned.network.num_classes() == 3);
  CHECK_THAT(tuned.new_head, Contains("dense 7") && Contains("dense 3"));
  CHECK_THAT(network_text(tuned.network), Contains("dense 3 bias=0") && Contains("add n1"));

  CpuBackend backend(1);
  ParameterStore params(tuned.network, backend, memory::host_resource(), 0, 1);
  const WeightTransfer transfer = load_matching_weights(saved.file, tuned.network, params);
  CHECK(transfer.loaded.size() == 2);
  REQUIRE(transfer.kept.size() == 1);
  CHECK_THAT(transfer.kept[0], Contains("dense 3"));
}

TEST_CASE("a new head of the file's own size is asked for, and the head is left out of the weights", "[checkpoint]") {
  Saved saved("conv 4 3 pad=1\nrelu\nglobalavgpool\nflatten\ndense 5\n", 5);
  const FineTuningNetwork fresh = network_for_fine_tuning(saved.info, saved.file, 5, true);
  CHECK(fresh.network.num_classes() == 5);
  CHECK_THAT(fresh.new_head, Contains("dense 5 -> dense 5") && Contains("initialised"));

  CpuBackend backend(1);
  ParameterStore params(fresh.network, backend, memory::host_resource(), 0, 1);
  const WeightTransfer all = load_matching_weights(saved.file, fresh.network, params);
  CHECK(all.loaded.size() == 2);  // same shapes: the head would load
  CHECK(all.kept.empty());
  const int head = fresh.network.last();
  const WeightTransfer backbone = load_matching_weights(saved.file, fresh.network, params, head - 1);
  CHECK(backbone.loaded.size() == 1);
  REQUIRE(backbone.kept.size() == 1);
  CHECK_THAT(backbone.kept[0], Contains("dense 5"));
  CHECK(load_matching_weights(saved.file, fresh.network, params, 0).loaded.empty());
}

TEST_CASE("fine-tuning refuses a network whose last layer is not a dense head", "[checkpoint]") {
  Saved conv_head("conv 4 3 pad=1\nrelu\nconv 5 1\nglobalavgpool\nflatten\n", 0);
  CHECK_THAT(error_of<ShapeError>([&] { network_for_fine_tuning(conv_head.info, conv_head.file, 3); }),
             Contains("flatten") && Contains("not a dense layer") && Contains("5 outputs"));
}
