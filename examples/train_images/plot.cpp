#include "plot.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/atomic_file.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::app {
namespace {

// Runs gnuplot with `script` on its standard input; its exit status. Its own output goes
// nowhere: where it cannot open its output file it writes the PNG to standard output, which is
// the terminal's.
int run_gnuplot(const std::string& script) {
  FILE* pipe = ::popen("gnuplot >/dev/null 2>&1", "w");
  if (!pipe) return -1;
  const bool written = std::fwrite(script.data(), 1, script.size(), pipe) == script.size();
  const int status = ::pclose(pipe);
  return written && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// pngcairo where gnuplot has it, else png; empty when gnuplot does not run.
const std::string& png_terminal() {
  static const std::string terminal = run_gnuplot("set terminal pngcairo\n") == 0 ? "pngcairo"
                                      : run_gnuplot("set terminal png\n") == 0    ? "png"
                                                                                  : "";
  return terminal;
}

// A whole PNG: the signature first and the IEND chunk last (gnuplot on a full disk may leave
// a truncated file and still exit 0).
bool whole_png(const std::filesystem::path& file) {
  static constexpr char kSignature[] = "\x89PNG\r\n\x1a\n";
  static constexpr char kEnd[] = "\0\0\0\0IEND\xae\x42\x60\x82";
  std::ifstream in(file, std::ios::binary);
  std::string head(8, '\0'), tail(12, '\0');
  if (!in.read(head.data(), 8) || !in.seekg(-12, std::ios::end) || !in.read(tail.data(), 12)) return false;
  return head == std::string(kSignature, 8) && tail == std::string(kEnd, 12);
}

// A gnuplot string: single quotes, and a quote inside doubled (nothing in a path can end it).
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Runs `script` (which writes the PNG to `file`'s temporary) and renames the PNG over the target.
void draw(const std::string& path, AtomicFile& file, const std::string& script) {
  if (run_gnuplot(script) != 0) throw Error("drawing the plot " + path + " failed (gnuplot)");
  if (!whole_png(file.temporary()))
    throw Error("writing the plot " + path + " failed: gnuplot wrote no whole PNG (disk full?); the previous plot "
                "is unchanged");
  file.commit();
}

}  // namespace

void check_plotting() {
  if (png_terminal().empty())
    throw Error("--plot needs gnuplot with a PNG terminal (Debian: gnuplot-nox), which does not run here");
}

void write_plot(const std::string& path, const RunProgress& progress, std::size_t batches_per_epoch) {
  std::ostringstream script;
  script << "$steps << EOD\n";
  for (std::size_t s = 0; s < progress.steps.size(); ++s)
    script << static_cast<double>(s + 1) / static_cast<double>(batches_per_epoch ? batches_per_epoch : 1) << " "
           << progress.steps[s].loss << "\n";
  script << "EOD\n$epochs << EOD\n";
  auto value = [](const std::optional<double>& v) { return v ? std::to_string(*v) : std::string("NaN"); };
  for (const EpochRecord& e : progress.epochs)
    script << e.epoch << " " << e.train_loss << " " << e.train_accuracy << " " << value(e.test_loss) << " "
           << value(e.test_accuracy) << " " << value(e.validation_loss) << " " << value(e.validation_accuracy)
           << "\n";
  // An explicit x range: after one epoch every point has x = 1, which gnuplot calls empty.
  const int last_epoch = progress.epochs.empty() ? 1 : std::max(1, progress.epochs.back().epoch);
  // gnuplot writes the temporary beside the target; a whole PNG is renamed over it.
  AtomicFile file(path);
  script << "EOD\n"
         << "set terminal " << png_terminal() << " size 1200,450 noenhanced\n"
         << "set output " << quoted(file.temporary().string()) << "\n"
         << "set multiplot layout 1,2\n"
         << "set xlabel 'epoch'\nset ylabel 'loss'\nset grid\nset key top right\n"
         << "set xrange [0:" << last_epoch << "]\n"
         << "plot $steps using 1:2 with lines lc rgb '#c0c0c0' title 'step', "
            "$epochs using 1:2 with linespoints lw 2 lc rgb '#1f77b4' title 'train', "
            "$epochs using 1:6 with linespoints lw 2 lc rgb '#2ca02c' title 'validation', "
            "$epochs using 1:4 with linespoints lw 2 lc rgb '#d62728' title 'test'\n"
         << "set ylabel 'accuracy'\nset yrange [0:1]\nset key bottom right\n"
         << "plot $epochs using 1:3 with linespoints lw 2 lc rgb '#1f77b4' title 'train', "
            "$epochs using 1:7 with linespoints lw 2 lc rgb '#2ca02c' title 'validation', "
            "$epochs using 1:5 with linespoints lw 2 lc rgb '#d62728' title 'test'\n"
         << "unset multiplot\nset output\n";
  draw(path, file, script.str());
}

void write_range_plot(const std::string& path, const std::vector<float>& rates, const std::vector<double>& losses,
                      float suggestion) {
  std::ostringstream script;
  script << "$range << EOD\n";
  for (std::size_t i = 0; i < rates.size() && i < losses.size(); ++i) script << rates[i] << " " << losses[i] << "\n";
  AtomicFile file(path);
  script << "EOD\n"
         << "set terminal " << png_terminal() << " size 800,450 noenhanced\n"
         << "set output " << quoted(file.temporary().string()) << "\n"
         << "set logscale x\nset format x '%.0e'\nset xlabel 'learning rate'\nset ylabel 'loss (smoothed)'\nset grid\n"
         << "set arrow from " << suggestion << ", graph 0 to " << suggestion << ", graph 1 nohead lc rgb '#d62728'\n"
         << "plot $range using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'loss', "
            "NaN lc rgb '#d62728' title 'steepest descent'\n"
         << "set output\n";
  draw(path, file, script.str());
}

}  // namespace cnn::app
