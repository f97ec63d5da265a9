#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include <cnnengine/memory/memory_resource.hpp>

namespace alloc_compare {

namespace {

using cnn::memory::format_bytes;

std::string fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string csv_number(double value) {
  if (std::isnan(value)) return "";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::ofstream open_for_writing(const std::filesystem::path& file) {
  std::ofstream out(file, std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return out;
}

void check_written(std::ofstream& out, const std::filesystem::path& file) {
  out.flush();
  if (!out) throw std::runtime_error("could not write all of " + file.string());
}

// The out-of-memory cell: refused requests under the budget, or why the run could not go on.
std::string oom_cell(const Row& row) {
  if (!row.under_budget) return "-";
  const RunResult& r = *row.under_budget;
  if (r.setup_failed) return "no fit";
  const Summary s = summarize(r);
  return std::to_string(s.out_of_memory) + (r.failure.empty() ? "" : " (stopped)");
}

std::string pad(const std::string& text, std::size_t width, bool left) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return left ? text + fill : fill + text;
}

}  // namespace

std::string format_table(const Comparison& c, const RunInfo& info) {
  const std::vector<std::string> header = {"workload", "strategy", "steps", "ms/step", "alloc us/step", "upstream calls/step",
                                           "peak reserved", "reserved/LB", "frag mean", "frag max", "OOM@budget", "max B@budget"};
  std::vector<std::vector<std::string>> cells;
  for (const Row& row : c.rows) {
    const Summary s = summarize(row.run);
    cells.push_back({row.run.workload, cnn::memory::to_string(row.run.strategy), std::to_string(s.steps), fixed(s.ms_per_step, 3),
                     fixed(s.allocator_us_per_step, 1), fixed(s.upstream_calls_per_step, 3), format_bytes(row.run.peak_reserved),
                     fixed(s.reserved_ratio, 3), fixed(s.fragmentation_mean, 3), fixed(s.fragmentation_max, 3), oom_cell(row),
                     row.largest_batch < 0 ? "-" : std::to_string(row.largest_batch)});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& line : cells) width[i] = std::max(width[i], line[i].size());
  }
  std::ostringstream out;
  out << "alloc_compare, " << info.date << "\n"
      << "  " << info.command << "\n"
      << "  machine: " << info.machine << "\n  backend: " << info.backend << "; upstream: " << info.upstream << "\n"
      << "  budget: " << (c.budget ? format_bytes(c.budget) : std::string("none")) << "\n\n";
  auto line = [&](const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) out << (i ? "  " : "") << pad(fields[i], width[i], i < 2);
    out << "\n";
  };
  line(header);
  for (const auto& fields : cells) line(fields);

  out << "\nreference for reserved/LB (liveness lower bound at the batch + blocks held all run):";
  std::string last;
  for (const Row& row : c.rows) {
    if (row.run.workload == last) continue;
    last = row.run.workload;
    out << " " << last << " " << format_bytes(row.run.reference_bytes) << ";";
  }
  out << "\nfrag: 1 - largest free / total free at each step's fullest moment (pool and arena; the others hold no free list).\n"
         "Timings are wall-clock on a machine shared with other work: noisy. Byte counts and calls are exact.\n";
  return out.str();
}

void write_summary_csv(const Comparison& c, const std::filesystem::path& file) {
  std::ofstream out = open_for_writing(file);
  out << "workload,strategy,steps,ms_per_step,allocator_us_per_step,upstream_calls_per_step,upstream_calls_in_steps,"
         "setup_reserved_bytes,peak_reserved_bytes,reference_bytes,reserved_over_lower_bound,fragmentation_mean,"
         "fragmentation_max,completed,budget_bytes,fits_budget,oom_under_budget,peak_reserved_under_budget,"
         "largest_batch_under_budget\n";
  for (const Row& row : c.rows) {
    const Summary s = summarize(row.run);
    out << row.run.workload << ',' << cnn::memory::to_string(row.run.strategy) << ',' << s.steps << ',' << csv_number(s.ms_per_step) << ','
        << csv_number(s.allocator_us_per_step) << ',' << csv_number(s.upstream_calls_per_step) << ','
        << s.upstream_calls_in_steps << ',' << row.run.setup_reserved << ',' << row.run.peak_reserved << ','
        << row.run.reference_bytes << ',' << csv_number(s.reserved_ratio) << ',' << csv_number(s.fragmentation_mean) << ','
        << csv_number(s.fragmentation_max) << ',' << (s.completed ? 1 : 0) << ',' << c.budget << ',';
    if (row.under_budget) {
      const Summary b = summarize(*row.under_budget);
      out << (b.completed && b.out_of_memory == 0 ? 1 : 0) << ',' << b.out_of_memory << ',' << row.under_budget->peak_reserved;
    } else {
      out << ",,";
    }
    out << ',' << (row.largest_batch < 0 ? std::string() : std::to_string(row.largest_batch)) << '\n';
  }
  check_written(out, file);
}

void write_steps_csv(const Comparison& c, const std::filesystem::path& file, int stride) {
  std::ofstream out = open_for_writing(file);
  out << "workload,strategy,step,batch,reserved_bytes,upstream_calls,upstream_frees,step_ns,allocator_ns,fragmentation,"
         "out_of_memory\n";
  for (const Row& row : c.rows) {
    const auto& steps = row.run.steps;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (i % static_cast<std::size_t>(stride) != 0 && i + 1 != steps.size()) continue;
      const StepSample& s = steps[i];
      out << row.run.workload << ',' << cnn::memory::to_string(row.run.strategy) << ',' << i + 1 << ',' << s.batch << ',' << s.reserved << ','
          << s.upstream_calls << ',' << s.upstream_frees << ',' << s.step_ns << ',' << s.allocator_ns << ','
          << csv_number(s.fragmentation) << ',' << s.out_of_memory << '\n';
    }
  }
  check_written(out, file);
}

void write_json(const Comparison& c, const std::vector<Check>& checks, const Options& o, const RunInfo& info,
                const std::filesystem::path& file) {
  using nlohmann::json;
  auto number = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
  json j;
  j["command"] = info.command;
  j["date"] = info.date;
  j["machine"] = info.machine;
  j["backend"] = info.backend;
  j["upstream"] = info.upstream;
  j["config"] = {{"preset", o.preset},           {"input", o.input},
                 {"classes", o.classes},         {"batch", o.batch},
                 {"workloads", o.workloads},     {"strategies", o.strategies},
                 {"steady_steps", o.steady_steps}, {"churn_steps", o.churn_steps},
                 {"extended_steps", o.extended_steps}, {"replay_steps", o.replay_steps},
                 {"warmup", o.warmup},           {"budget_bytes", c.budget},
                 {"batch_limit", o.batch_limit}, {"search_steps", o.search_steps},
                 {"arena_factor", o.arena_factor}, {"seed", o.seed}};
  json rows = json::array();
  for (const Row& row : c.rows) {
    const Summary s = summarize(row.run);
    json r = {{"workload", row.run.workload},
              {"strategy", cnn::memory::to_string(row.run.strategy)},
              {"steps", s.steps},
              {"completed", s.completed},
              {"ms_per_step", s.ms_per_step},
              {"allocator_us_per_step", s.allocator_us_per_step},
              {"upstream_calls_per_step", s.upstream_calls_per_step},
              {"upstream_calls_in_steps", s.upstream_calls_in_steps},
              {"setup_reserved_bytes", row.run.setup_reserved},
              {"peak_reserved_bytes", row.run.peak_reserved},
              {"reserved_min_bytes", s.reserved_min},
              {"reserved_max_bytes", s.reserved_max},
              {"reference_bytes", row.run.reference_bytes},
              {"reserved_over_lower_bound", s.reserved_ratio},
              {"fragmentation_mean", number(s.fragmentation_mean)},
              {"fragmentation_max", number(s.fragmentation_max)}};
    if (row.under_budget) {
      const Summary b = summarize(*row.under_budget);
      r["under_budget"] = {{"fits", b.completed && b.out_of_memory == 0},
                           {"setup_failed", row.under_budget->setup_failed},
                           {"out_of_memory", b.out_of_memory},
                           {"steps_with_oom", b.steps_with_oom},
                           {"steps", b.steps},
                           {"peak_reserved_bytes", row.under_budget->peak_reserved}};
    }
    if (row.largest_batch >= 0) r["largest_batch_under_budget"] = row.largest_batch;
    rows.push_back(std::move(r));
  }
  j["results"] = std::move(rows);
  json verdicts = json::array();
  for (const Check& check : checks)
    verdicts.push_back({{"check", check.name}, {"verdict", verdict_word(check.verdict)}, {"detail", check.detail}});
  j["checks"] = std::move(verdicts);
  std::ofstream out = open_for_writing(file);
  out << j.dump(2) << '\n';
  check_written(out, file);
}

}  // namespace alloc_compare
