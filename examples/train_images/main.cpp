// train_images: train a convolutional network on an image folder or IDX files (Fashion-MNIST).
//
// Exit codes: 0 success; 1 an error (a corrupt file, a run that diverged: the message names it);
// 2 a command line that cannot run as given; 3 the budget cannot hold the network; 128 + N when
// signal N (SIGINT 130, SIGTERM 143) stopped the run, after it was saved where one was asked.
#include <iostream>
#include <string>

#include "cnnengine/cnnengine.hpp"
#include "inference_commands.hpp"
#include "options.hpp"
#include "stop_signal.hpp"
#include "train_command.hpp"
#include "usage_error.hpp"

namespace {

// --doctor: the environment report; exit 1 when it found a problem.
int doctor() {
  const std::string report = cnn::environment_report();
  std::cout << report;
  return report.find("ERROR") == std::string::npos ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  cnn::app::Options o;
  CLI::App app{"train_images: train a convolutional network on images (cnnengine)"};
  cnn::app::add_options(app, o);
  try {
    app.parse(argc, argv);
    cnn::app::check_combinations(o);
    cnn::app::record_given(app, o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : 2;
  }
  try {
    if (o.doctor) return doctor();
    if (o.evaluate) return cnn::app::evaluate_command(o);
    if (!o.predict.empty()) return cnn::app::predict_command(o);
    if (!o.export_onnx.empty() && !o.load.empty() && !o.given.count("--data")) return cnn::app::export_command(o);
    cnn::app::install_stop_handlers();
    return cnn::app::train(o);
  } catch (const cnn::TrainingDiverged& e) {
    std::cerr << "error: " << e.what() << (o.save.empty() ? "" : "; " + o.save + " is unchanged") << "\n";
    return 1;
  } catch (const cnn::app::UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const cnn::BudgetTooSmall& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
