// alloc_compare: the same work on every allocation strategy (planned, arena, pool, direct);
// a table, CSV, JSON and a PNG of reserved bytes over steps. See benchmarks/results/README.md.
//
// Exit status: 0 when everything that must hold holds (a missed goal is reported, not an
// error), 1 when a must-hold check fails, 2 on an error.
#include <CLI/CLI.hpp>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <cnnengine/backends/device/device.hpp>
#include "checks.hpp"
#include "comparison.hpp"
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/models/network_text.hpp>
#include "plot.hpp"
#include "report.hpp"
#if CNN_HAVE_CUDA
#include "backends/cuda/detail/cuda_resources.hpp"
#endif

namespace {

namespace mem = cnn::memory;
using namespace alloc_compare;

cnn::Shape parse_shape(const std::string& text) {
  int c = 0, h = 0, w = 0;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  if (!(in >> c >> x1 >> h >> x2 >> w) || x1 != 'x' || x2 != 'x' || !in.eof() || c <= 0 || h <= 0 || w <= 0)
    throw std::invalid_argument("--input '" + text + "': expected CxHxW, e.g. 1x28x28");
  return cnn::Shape{c, h, w};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return text;
}

std::string machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return std::to_string(std::thread::hardware_concurrency()) + " cores, " + model;
}

std::string joined(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  return command;
}

// The base upstream: the host, or the CUDA device's cudaMalloc.
std::unique_ptr<mem::MemoryResource> device_upstream(std::optional<cnn::DeviceKind> device) {
  if (device != cnn::DeviceKind::cuda) return nullptr;
#if CNN_HAVE_CUDA
  return std::make_unique<mem::CudaDeviceResource>(0);
#else
  throw cnn::ConfigError("--device cuda: this build has no CUDA backend (configure with -DCNN_CUDA=ON)");
#endif
}

// A budget that cannot hold one sample leaves nothing to compare: every strategy would be
// refused before step 1. On a GPU the libraries' own memory alone can be more than a small budget.
void refuse_budget_without_one_sample(Workbench& bench, std::size_t budget) {
  const cnn::MemoryBreakdown one = bench.breakdown(1, budget);
  if (one.fits()) return;
  const std::string libraries =
      one.library ? ", of which the backend's libraries hold " + mem::format_bytes(one.library) : std::string();
  throw cnn::ConfigError("--budget " + mem::format_bytes(budget) + " cannot hold this network at batch 1 (it needs " +
                         mem::format_bytes(one.total()) + libraries + "): give a larger --budget\n" +
                         cnn::format_memory_table(one));
}

int run(const Options& o, const std::string& command) {
  const cnn::Shape shape = parse_shape(o.input);
  const std::size_t budget = o.budget.empty() ? 0 : mem::parse_bytes(o.budget);
  cnn::DeviceRequest request;
  request.device = cnn::parse_device(o.device);
  const std::unique_ptr<mem::MemoryResource> device_memory = device_upstream(request.device);
  mem::MemoryResource& base = device_memory ? *device_memory : mem::host_resource();
  request.threads = o.threads;
  const cnn::DeviceChoice device = cnn::select_device(request);

  BenchConfig config;
  config.seed = o.seed;
  config.arena_factor = o.arena_factor;
  config.warmup = o.warmup;
  Workbench bench([&] { return cnn::make_network(o.preset, shape, o.classes); }, *device.backend, base, config);
  if (budget) refuse_budget_without_one_sample(bench, budget);

  const Comparison comparison = run_comparison(bench, o, budget);
  const std::vector<Check> checks = evaluate(comparison);
  const RunInfo info{command, utc_now(), machine(), device.backend->description(), base.name()};

  const std::filesystem::path out(o.out);
  std::filesystem::create_directories(out);
  const std::string table = format_table(comparison, info) + "\n" + format_checks(checks);
  std::cout << "\n" << table;
  std::ofstream(out / "alloc_table.txt") << table;
  write_summary_csv(comparison, out / "alloc_summary.csv");
  write_steps_csv(comparison, out / "alloc_steps.csv", o.series_stride);
  write_json(comparison, checks, o, info, out / "alloc_results.json");
  std::cout << "\nwrote " << (out / "alloc_table.txt").string() << ", alloc_summary.csv, alloc_steps.csv, alloc_results.json\n";
  if (o.plot) {
    const std::string title = "reserved bytes per step: " + o.preset + " " + o.input + ", batch " + std::to_string(o.batch) +
                              " (" + base.name() + ")";
    std::cout << draw_plot(comparison, title, out / "alloc_reserved.png") << "\n";
  }
  return any_failed(checks) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"alloc_compare: the same work on every allocation strategy"};
  const std::vector<std::string> workloads = {"steady", "churn", "extended", "replay"};
  const std::vector<std::string> strategies = {"planned", "arena", "pool", "direct"};
  app.add_option("--preset", o.preset, "network: a preset (small, small-bn, resnet, resnet18) or a network file")->capture_default_str();
  app.add_option("--input", o.input, "sample shape CxHxW")->capture_default_str();
  app.add_option("--classes", o.classes, "classes")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "batch B (churn draws each step's batch from [B/2, B])")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--workloads", o.workloads, "which workloads, in order")->delimiter(',')->capture_default_str()->check(CLI::IsMember(workloads));
  app.add_option("--strategies", o.strategies, "which strategies, in order")->delimiter(',')->capture_default_str()->check(CLI::IsMember(strategies));
  app.add_option("--steady-steps", o.steady_steps, "training steps of the steady workload")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--churn-steps", o.churn_steps, "steps of the churn workload")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--extended-steps", o.extended_steps, "steps of the extended churn")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--replay-steps", o.replay_steps, "training steps recorded for the replay")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", o.warmup, "first steps left out of the per-step means")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--budget", o.budget, "simulated device capacity (e.g. 64MiB): OOM counts and the largest batch that fits");
  app.add_option("--batch-limit", o.batch_limit, "largest batch the search tries")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--search-steps", o.search_steps, "churn steps per trial of the batch search")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--arena-factor", o.arena_factor, "without a budget the arena strategy reserves this x the planned arena")
      ->capture_default_str()->check(CLI::Range(1.0, 1000.0));
  app.add_option("--seed", o.seed, "seed of the batches and the parameters")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (0: all)")->capture_default_str();
  app.add_option("--device", o.device, "cpu (host upstream) or cuda (cudaMalloc upstream, CUDA builds)")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--out", o.out, "folder for alloc_table.txt, alloc_summary.csv, alloc_steps.csv, alloc_results.json, alloc_reserved.png")->capture_default_str();
  app.add_option("--trace-file", o.trace_file, "keep the replay's trace here (default: a temporary file)");
  app.add_option("--series-stride", o.series_stride, "alloc_steps.csv keeps every n-th step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("!--no-plot", o.plot, "skip the PNG");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(o, joined(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "alloc_compare: error: " << e.what() << "\n";
    return 2;
  }
}
