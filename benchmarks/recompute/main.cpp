// recompute_bench: what recomputation buys under a fixed budget. The largest
// micro-batch each policy fits in the budget; then, at multiples of the largest that fits without
// recomputation, the throughput recomputation costs: a trainer recomputing under the budget
// against one keeping everything (no budget) at the same micro-batch, timed in turns on the same
// batches. Results: benchmarks/results/README.md.
//
// Exit status: 0 when what must hold holds (both trainers end with the same parameters, to the
// bit on the CPU; the recomputing one never reserves more than the budget), 1 when it does not,
// 2 on an error. A missed goal is reported, not an error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "alternating.hpp"
#include <cnnengine/cnnengine.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "engine/train/planning_options.hpp"
#include "memory/statistics_adaptor.hpp"

namespace {

using namespace cnn;
using recompute_bench::median;

struct Options {
  std::string model = "resnet18";
  std::string input = "3x32x32";
  int classes = 10;
  std::string budget = "512MiB";
  std::vector<int> factors{2, 4};
  bool at_largest = true;  // also time the largest micro-batch auto fits
  int rounds = 5;
  int steps = 1;
  int largest = 2048;  // the largest micro-batch the planner tries
  int threads = 2;
  std::string device = "cpu";
  std::string out;     // file prefix for .txt and .json; empty: print only
};

Shape parse_shape(const std::string& text) {
  int c = 0, h = 0, w = 0;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  if (!(in >> c >> x1 >> h >> x2 >> w) || x1 != 'x' || x2 != 'x' || c <= 0 || h <= 0 || w <= 0)
    throw ConfigError("--input '" + text + "': expected CxHxW, e.g. 3x32x32");
  return Shape{c, h, w};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

TrainerOptions trainer_options(int micro_batch, RecomputePolicy policy, std::size_t budget) {
  TrainerOptions o;
  o.batch = micro_batch;  // one micro-batch a step: the micro-batch is what is compared
  o.micro_batch = micro_batch;
  o.recompute = policy;
  o.memory_budget = budget;
  o.schedule.kind = ScheduleKind::constant;
  return o;
}

struct Measured {
  double factor = 0;
  int micro_batch = 0, recomputed_layers = 0;
  double modelled_extra = 0;
  recompute_bench::Rates rates;
  bool same_parameters = false, within_budget = false;
  std::size_t peak = 0;
};

// Keeping (no budget) against recomputing (under the budget) at one micro-batch.
Measured measure(const Options& o, Backend& backend, Shape shape, std::size_t budget, double factor, int micro_batch) {
  Measured m;
  m.factor = factor;
  m.micro_batch = micro_batch;
  Network keeping_net = make_network(o.model, shape, o.classes);
  Network recomputing_net = make_network(o.model, shape, o.classes);
  memory::StatisticsAdaptor stats(backend.device_memory());
  Trainer keeping(keeping_net, backend, backend.device_memory(), trainer_options(micro_batch, RecomputePolicy::none, 0));
  Trainer recomputing(recomputing_net, backend, stats,
                      trainer_options(micro_batch, RecomputePolicy::automatic, budget));
  m.recomputed_layers = recomputing.memory().recomputed_layers;
  m.modelled_extra = recomputing.memory().recompute_fraction;
  const recompute_bench::SyntheticBatches data(shape, o.classes, micro_batch, 1 + o.rounds * o.steps, 7);
  std::cout << "  micro-batch " << micro_batch << ": warming up" << std::flush;
  keeping.train_step(data.batch(0));  // warm-up: thread pools, first touches
  recomputing.train_step(data.batch(0));
  std::cout << ", timing " << o.rounds << " rounds in turns" << std::flush;
  m.rates = recompute_bench::time_alternately(keeping, recomputing, data, 1, o.rounds, o.steps);
  std::cout << "\n";
  m.same_parameters = keeping.parameters().download() == recomputing.parameters().download();
  m.peak = stats.statistics().peak_bytes;
  m.within_budget = m.peak <= budget;
  return m;
}

int run(const Options& o, const std::string& command) {
  const Shape shape = parse_shape(o.input);
  const std::size_t budget = memory::parse_bytes(o.budget);
  DeviceRequest request;
  request.device = parse_device(o.device);
  request.threads = o.threads;
  DeviceChoice device = select_device(request);
  Backend& backend = *device.backend;

  Network net = make_network(o.model, shape, o.classes);
  TrainerOptions planning = trainer_options(1, RecomputePolicy::none, budget);
  planning.batch = o.largest;
  planning.micro_batch = 0;
  const BatchPlanner planner(net, backend, planning_options(planning, net, backend));
  const int plain = planner.largest_fitting(o.largest, RecomputePolicy::none);
  const int cheap = planner.largest_fitting(o.largest, RecomputePolicy::cheap);
  const int most = planner.largest_fitting(o.largest, RecomputePolicy::automatic);
  if (plain == 0) throw ConfigError("nothing fits " + o.budget + " without recomputation: no base to compare with");

  std::ostringstream text;
  text << "recompute_bench: " << o.model << " " << o.input << ", " << o.classes << " classes, AdamW, budget " << o.budget
       << "\n  " << utc_now() << "; " << std::thread::hardware_concurrency() << " cores, " << cpu_model() << "; "
       << backend.description() << "\n  command: " << command << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "largest micro-batch in %s: none %d, cheap %d (%.2fx), auto %d (%.2fx)\n\n",
                o.budget.c_str(), plain, cheap, double(cheap) / plain, most, double(most) / plain);
  text << line;
  std::cout << text.str() << std::flush;

  nlohmann::json json = {{"command", command}, {"date", utc_now()}, {"cpu", cpu_model()},
                         {"backend", backend.description()}, {"model", o.model}, {"input", o.input},
                         {"budget_bytes", budget}, {"rounds", o.rounds}, {"steps_per_round", o.steps},
                         {"largest_micro_batch", {{"none", plain}, {"cheap", cheap}, {"auto", most}}}};
  std::vector<Measured> measured;
  for (int factor : o.factors) {
    const int b = factor * plain;
    if (b > most) {
      std::snprintf(line, sizeof line, "%dx (micro-batch %d): does not fit %s even recomputing\n", factor, b,
                    o.budget.c_str());
      text << line;
      json["measured"].push_back({{"factor", factor}, {"micro_batch", b}, {"fits", false}});
      continue;
    }
    measured.push_back(measure(o, backend, shape, budget, factor, b));
  }
  if (o.at_largest && most % plain != 0)
    measured.push_back(measure(o, backend, shape, budget, double(most) / plain, most));

  const double goals[][2] = {{2, 0.10}, {4, 0.35}};  // factor, throughput lost at most
  text << "  factor   micro-batch  recomputed  modelled  keeping/s  recomputing/s  ratio median [min, max]  lost   goal\n";
  bool must_hold = true;
  for (const Measured& m : measured) {
    const std::vector<double> ratios = m.rates.ratios();
    const double ratio = median(ratios);
    std::string goal = "-";
    for (const auto& g : goals)
      if (m.factor == g[0])
        goal = std::string(1.0 - ratio <= g[1] ? "met" : "MISSED") + " (<= " + std::to_string(int(g[1] * 100)) + "%)";
    std::snprintf(line, sizeof line, "  %5.2fx  %10d  %10d  %+7.1f%%  %9.2f  %13.2f  %6.3f [%.3f, %.3f]  %5.1f%%  %s\n",
                  m.factor, m.micro_batch, m.recomputed_layers, 100 * m.modelled_extra, median(m.rates.first),
                  median(m.rates.second), ratio, *std::min_element(ratios.begin(), ratios.end()),
                  *std::max_element(ratios.begin(), ratios.end()), 100 * (1 - ratio), goal.c_str());
    text << line;
    if (!m.same_parameters) text << "  FAIL: at " << m.factor << "x the two trainers end with different parameters\n";
    if (!m.within_budget)
      text << "  FAIL: at " << m.factor << "x recomputing reserved " << memory::format_bytes(m.peak) << "\n";
    must_hold = must_hold && m.within_budget && (m.same_parameters || backend.kind() != DeviceKind::cpu);
    json["measured"].push_back({{"factor", m.factor}, {"micro_batch", m.micro_batch}, {"fits", true},
                                {"recomputed_layers", m.recomputed_layers}, {"modelled_extra", m.modelled_extra},
                                {"keeping_samples_per_second", m.rates.first},
                                {"recomputing_samples_per_second", m.rates.second}, {"ratios", ratios},
                                {"median_ratio", ratio}, {"same_parameters", m.same_parameters},
                                {"peak_reserved_bytes", m.peak}});
  }
  text << (must_hold ? "PASS" : "FAIL") << ": the same parameters to the bit (CPU) and the budget held\n";
  std::cout << "\n" << text.str().substr(text.str().find("  factor"));
  if (!o.out.empty()) {
    std::ofstream(o.out + ".txt") << text.str();
    std::ofstream(o.out + ".json") << json.dump(2) << "\n";
    std::cout << "wrote " << o.out << ".txt and .json\n";
  }
  return must_hold ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"recompute_bench: the micro-batch recomputation fits under a budget, and what it costs"};
  app.add_option("--model", o.model, "a preset or a network file")->capture_default_str();
  app.add_option("--input", o.input, "sample shape CxHxW")->capture_default_str();
  app.add_option("--classes", o.classes)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--budget", o.budget, "the memory budget")->capture_default_str();
  app.add_option("--factors", o.factors, "multiples of the largest micro-batch without recomputation to time")
      ->delimiter(',')->capture_default_str();
  app.add_flag("!--not-at-largest", o.at_largest, "do not time the largest micro-batch auto fits");
  app.add_option("--rounds", o.rounds, "timed rounds, the two trainers in turns")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "optimizer steps per trainer per round")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--largest", o.largest, "the largest micro-batch the planner tries")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "CPU threads")->capture_default_str();
  app.add_option("--device", o.device)->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--out", o.out, "write OUT.txt and OUT.json");
  CLI11_PARSE(app, argc, argv);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  try {
    return run(o, command);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
