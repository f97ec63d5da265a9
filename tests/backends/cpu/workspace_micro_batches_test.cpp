// Every layer's workspace, asked at the planned micro-batch, holds what each smaller micro-batch
// needs (Backend's workspace contract): an epoch's short last batch, accumulation's last
// micro-batch and a replay after an out-of-memory failure all run in the plan's workspace. Swept
// over every preset and a network of every layer word, at sizes that reach each kernel's
// layouts (depthwise planes by blocks and by plane, backward-filter by channel and by plane), for
// micro-batches 1 to the planned one and several thread counts, in fp32 and bf16; then a step
// whose last micro-batch is short runs in the plan of the longer one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

// Every layer word, grouped and dilated convolutions among them, on planes large enough for the
// depthwise kernels' by-plane layout (over 112 x 112).
const char* const kEveryLayerKind = R"(
conv 16 3 pad=1 as=stem
dwconv 3 pad=1
dwconv 5 stride=2 pad=2 dilation=1
conv 16 3 pad=same dilation=2 groups=4
batchnorm
relu
groupnorm 4
leakyrelu
layernorm
relu6
conv 16 1 as=branch
sigmoid
mul branch
deconv 16 2 stride=2
upsample 2
maxpool 2 stride=2
avgpool 3 stride=2 pad=1 ceil=1
silu as=a
conv 16 3 pad=1
gelu
add a
concat a
hardswish
hardsigmoid
tanh
globalavgpool
flatten
dropout 0.1
dense 32
dense 10
)";

struct Sweep {
  std::string network;
  Shape input;
  int planned;  // the micro-batch planned
};

// Where a layer's need at a micro-batch exceeds what it asks at the planned one: "" where none.
std::string overrun(Network& net, CpuBackend& backend, int planned) {
  for (int i = 1; i < net.size(); ++i) {
    Layer& layer = *net.node(i).layer;
    for (ConvPass pass : {ConvPass::forward, ConvPass::backward}) {
      const std::size_t plan = layer.workspace_bytes(backend, planned, pass, SIZE_MAX);
      for (int n = 1; n < planned; ++n)
        if (const std::size_t need = layer.workspace_bytes(backend, n, pass, SIZE_MAX); need > plan)
          return "layer " + std::to_string(i) + " (" + layer.describe() + "), " +
                 (pass == ConvPass::forward ? "forward" : "backward") + ", " + std::to_string(backend.threads()) +
                 " threads: " + std::to_string(need) + " bytes at micro-batch " + std::to_string(n) + ", " +
                 std::to_string(plan) + " planned at " + std::to_string(planned);
    }
  }
  const Shape out = net.output_shape();
  const std::size_t plan = backend.loss_workspace_bytes(net.task(), out.batched(planned));
  for (int n = 1; n < planned; ++n)
    if (backend.loss_workspace_bytes(net.task(), out.batched(n)) > plan)
      return "the loss at micro-batch " + std::to_string(n);
  return "";
}

Network network_of(const Sweep& s) {
  if (s.network.find('\n') != std::string::npos) return parse_network(s.network, s.input, 10);
  Network net = make_preset(s.network, s.input, 10);
  if (s.network == "unet") net.set_loss(LossOptions{.task = Task::segment});
  return net;
}

}  // namespace

TEST_CASE("every preset's and layer's workspace holds every smaller micro-batch", "[workspace][cpu]") {
  std::vector<Sweep> sweeps;
  for (const std::string& preset : preset_names()) {
    sweeps.push_back({preset, Shape{1, 28, 28}, 64});
    sweeps.push_back({preset, Shape{3, 64, 64}, 16});
  }
  // Depthwise planes over 112 x 112 run by plane, whose backward-filter layout depends on the batch.
  sweeps.push_back({"mobilenetv2", Shape{3, 256, 256}, 12});
  sweeps.push_back({kEveryLayerKind, Shape{3, 120, 120}, 12});
  sweeps.push_back({kEveryLayerKind, Shape{1, 28, 28}, 40});
  for (Precision precision : {Precision::fp32, Precision::bf16})
    for (int threads : {1, 2, 3, 4, 8})
      for (const Sweep& s : sweeps) {
        CpuBackend backend(threads, precision);
        Network net = network_of(s);
        INFO(s.network.substr(0, 40) << " on " << s.input.str() << ", " << to_string(precision));
        CHECK(overrun(net, backend, s.planned) == "");
      }
}

TEST_CASE("a short micro-batch runs in the workspace planned for a longer one", "[workspace][cpu][trainer]") {
  // 150 x 150 depthwise planes run by plane; backward-filter takes the 32 channels a range each
  // where the tensors fit in cache (up to 2 samples), else ranges of planes. A batch of 5 planned
  // at micro-batch 3 ends on a micro-batch of 2.
  CpuBackend backend(2);
  Network net = parse_network("conv 32 3 pad=1\ndwconv 3 pad=1\nglobalavgpool\nflatten\ndense 4\n",
                              Shape{3, 150, 150}, 4);
  TrainerOptions options;
  options.batch = 5;
  options.micro_batch = 3;
  Trainer trainer(net, backend, options);
  std::vector<float> images(5 * 3 * 150 * 150, 0.5f);
  std::vector<std::int32_t> labels{0, 1, 2, 3, 0};
  Batch batch;
  batch.images = images.data();
  batch.labels = labels.data();
  batch.size = 5;
  const StepReport report = trainer.train_step(batch);
  CHECK(report.micro_batches == 2);
  CHECK(std::isfinite(report.loss));
}
