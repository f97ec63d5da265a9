#include <cnnengine/engine/plan/memory_report.hpp>

#include <cstdio>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

void append_table_row(std::string& table, const char* name, std::size_t bytes, const std::string& note) {
  char line[160];
  std::snprintf(line, sizeof line, "  %-24s %12s  %s\n", name, memory::format_bytes(bytes).c_str(), note.c_str());
  table += line;
}

std::string format_memory_table(const MemoryBreakdown& m) {
  using memory::Category;
  using memory::format_bytes;
  std::string out;
  auto row = [&](const char* name, std::size_t bytes, const std::string& note = "") {
    append_table_row(out, name, bytes, note);
  };
  out += "memory plan for micro-batch " + std::to_string(m.micro_batch) + "\n";
  row("parameters", m.persistent[Category::parameters]);
  row("parameter gradients", m.persistent[Category::parameter_gradients]);
  row("optimizer state", m.persistent[Category::optimizer_state]);
  row("activations", m.arena_peak[Category::activations],
      m.values == ValueFormat::fp32 ? "at the step's peak" : "at the step's peak, values in " + to_string(m.values));
  row("workspace", m.arena_peak[Category::workspace] + m.library,
      m.library ? "incl. " + format_bytes(m.library) + " held by libraries" : "at the step's peak");
  row("data staging", m.arena_peak[Category::data_staging] + m.input_staging + m.loader_staging,
      "input slots" + (m.input_staging ? " (" + format_bytes(m.input_staging) + " to copy the next ahead)" : std::string()) +
          " + " + format_bytes(m.loader_staging) + " loader prefetch");
  if (m.communication) row("communication", m.communication, "the ranks' sums (data-parallel)");
  row("planning slack", m.arena_bytes - m.lower_bound);
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, "%.3f x the liveness lower bound %s", m.lower_bound ? double(m.arena_bytes) / m.lower_bound : 1.0,
                format_bytes(m.lower_bound).c_str());
  row("step arena", m.arena_bytes, ratio);
  row("total", m.total());
  if (m.budget) row("budget", m.budget, m.fits() ? "fits" : "DOES NOT FIT");
  if (!m.strategy_serves)
    out += "  the step buffers' strategy does not serve them within the budget: " + m.strategy_refusal + "\n";
  if (m.in_place_layers) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %12s  their output over their input\n", "in place",
                  (std::to_string(m.in_place_layers) + (m.in_place_layers == 1 ? " layer" : " layers")).c_str());
    out += line;
  }
  if (m.fused_relus) {
    char line[160];
    const std::string adds =
        m.fused_adds ? " (" + std::to_string(m.fused_adds) + " with a residual add before it)" : std::string();
    std::snprintf(line, sizeof line, "  %-24s %12s  each with the ReLU after it, in one pass%s\n", "BatchNorm",
                  (std::to_string(m.fused_relus) + (m.fused_relus == 1 ? " layer" : " layers")).c_str(),
                  adds.c_str());
    out += line;
  }
  if (m.fused_conv_relus) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %12s  each with the ReLU after it in its forward pass\n", "convolution",
                  (std::to_string(m.fused_conv_relus) + (m.fused_conv_relus == 1 ? " layer" : " layers")).c_str());
    out += line;
  }
  if (m.recompute != RecomputePolicy::none) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %12s  +%.1f%% compute in backward\n",
                  ("recomputed (" + to_string(m.recompute) + ")").c_str(),
                  (std::to_string(m.recomputed_layers) + " layers").c_str(), 100.0 * m.recompute_fraction);
    out += line;
  }
  return out;
}

std::string micro_batch_table_header() {
  return "  micro-batch   persistent  activations    workspace      staging        arena        total  fits";
}

std::string format_micro_batch_row(const MemoryBreakdown& m) {
  using memory::Category;
  using memory::format_bytes;
  char line[200];
  std::snprintf(line, sizeof line, "  %11d %12s %12s %12s %12s %12s %12s  %s", m.micro_batch,
                format_bytes(m.persistent.total()).c_str(), format_bytes(m.arena_peak[Category::activations]).c_str(),
                format_bytes(m.arena_peak[Category::workspace] + m.library).c_str(),
                format_bytes(m.arena_peak[Category::data_staging] + m.input_staging + m.loader_staging).c_str(),
                format_bytes(m.arena_bytes).c_str(), format_bytes(m.total()).c_str(),
                m.budget == 0 ? "-" : m.fits() ? "yes" : "no");
  return line;
}

std::string format_micro_batch_table(const std::vector<MemoryBreakdown>& rows) {
  std::string out = micro_batch_table_header() + "\n";
  for (const auto& m : rows) out += format_micro_batch_row(m) + "\n";
  return out;
}

}  // namespace cnn
