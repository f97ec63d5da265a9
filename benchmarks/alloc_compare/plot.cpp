#include "plot.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

namespace alloc_compare {

namespace {

// gnuplot's single-quoted strings double a quote.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

std::string colour(cnn::memory::Strategy strategy) {
  using cnn::memory::Strategy;
  static const std::map<Strategy, std::string> colours = {
      {Strategy::planned, "#1b9e77"}, {Strategy::arena, "#d95f02"}, {Strategy::pool, "#7570b3"}, {Strategy::direct, "#e7298a"}};
  const auto it = colours.find(strategy);
  return it == colours.end() ? "black" : it->second;
}

std::string script(const Comparison& c, const std::string& title, const std::filesystem::path& png) {
  std::vector<std::string> workloads;
  for (const Row& row : c.rows)
    if (workloads.empty() || workloads.back() != row.run.workload) workloads.push_back(row.run.workload);
  const std::size_t columns = workloads.size() > 1 ? 2 : 1;
  const std::size_t rows = (workloads.size() + columns - 1) / columns;

  std::ostringstream s;
  s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size " << 700 * columns << ","
    << 450 * rows << " font 'sans,10' } else { set terminal png size " << 700 * columns << "," << 450 * rows << " }\n"
    << "set output " << quoted(png.string()) << "\n";
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    s << "$run" << i << " << EOD\n";
    const auto& steps = c.rows[i].run.steps;
    for (std::size_t k = 0; k < steps.size(); ++k) s << k + 1 << ' ' << static_cast<double>(steps[k].reserved) / 1048576.0 << '\n';
    s << "EOD\n";
  }
  s << "set multiplot layout " << rows << "," << columns << " title " << quoted(title) << "\n"
    << "set xlabel 'step'\nset ylabel 'reserved (MiB)'\nset yrange [0:*]\nset grid\nset key bottom right invert\n";
  for (const std::string& workload : workloads) {
    s << "set title " << quoted(workload) << "\nplot";
    const char* separator = " ";
    // In reverse, so that the first strategy (planned) is drawn on top; the key is inverted back.
    for (std::size_t i = c.rows.size(); i-- > 0;) {
      const RunResult& run = c.rows[i].run;
      if (run.workload != workload || run.steps.empty()) continue;
      s << separator << "$run" << i << " using 1:2 with steps lw 2 lc rgb '" << colour(run.strategy) << "' title "
        << quoted(cnn::memory::to_string(run.strategy));
      separator = ", ";
    }
    s << "\n";
  }
  s << "unset multiplot\n";
  return s.str();
}

}  // namespace

std::string draw_plot(const Comparison& c, const std::string& title, const std::filesystem::path& png) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) return "no plot: gnuplot is not installed";
  FILE* gnuplot = ::popen("gnuplot", "w");
  if (!gnuplot) return "no plot: could not start gnuplot";
  const std::string text = script(c, title, png);
  const bool written = std::fwrite(text.data(), 1, text.size(), gnuplot) == text.size();
  const int status = ::pclose(gnuplot);
  if (!written || status != 0) return "no plot: gnuplot failed (exit status " + std::to_string(status) + ")";
  return "plot: " + png.string();
}

}  // namespace alloc_compare
