#include "plot.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cnnengine/base/error.hpp"

namespace cnn::app {
namespace {

// Runs gnuplot with `script` on its standard input; its exit status.
int run_gnuplot(const std::string& script) {
  FILE* pipe = ::popen("gnuplot 2>&1", "w");
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

// A gnuplot string: single quotes, and a quote inside doubled (nothing in a path can end it).
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
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
  for (const EpochRecord& e : progress.epochs)
    script << e.epoch << " " << e.train_loss << " " << e.train_accuracy << " "
           << (e.test_loss ? std::to_string(*e.test_loss) : "NaN") << " "
           << (e.test_accuracy ? std::to_string(*e.test_accuracy) : "NaN") << "\n";
  const std::filesystem::path target(path);
  const std::filesystem::path temporary =
      (target.has_parent_path() ? target.parent_path() : std::filesystem::path(".")) /
      (".cnnengine-plot-" + std::to_string(::getpid()) + ".png");
  script << "EOD\n"
         << "set terminal " << png_terminal() << " size 1200,450 noenhanced\n"
         << "set output " << quoted(temporary.string()) << "\n"
         << "set multiplot layout 1,2\n"
         << "set xlabel 'epoch'\nset ylabel 'loss'\nset grid\nset key top right\n"
         << "plot $steps using 1:2 with lines lc rgb '#c0c0c0' title 'step', "
            "$epochs using 1:2 with linespoints lw 2 lc rgb '#1f77b4' title 'train', "
            "$epochs using 1:4 with linespoints lw 2 lc rgb '#d62728' title 'test'\n"
         << "set ylabel 'accuracy'\nset yrange [0:1]\nset key bottom right\n"
         << "plot $epochs using 1:3 with linespoints lw 2 lc rgb '#1f77b4' title 'train', "
            "$epochs using 1:5 with linespoints lw 2 lc rgb '#d62728' title 'test'\n"
         << "unset multiplot\nset output\n";
  if (run_gnuplot(script.str()) != 0) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw Error("drawing the plot " + path + " failed (gnuplot)");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, target, ec);
  if (ec) throw Error("cannot write the plot " + path + ": " + ec.message());
}

}  // namespace cnn::app
