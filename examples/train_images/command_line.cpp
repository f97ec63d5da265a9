#include "command_line.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "base/utf8.hpp"
#include <cnnengine/cnnengine.hpp>
#include "inference_commands.hpp"
#include "option_suggestion.hpp"
#include "options.hpp"
#include "ranks.hpp"
#include "train_command.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

// --doctor: the environment report; exit 1 when it found a problem.
int doctor() {
  std::string report = environment_report();
  report += "MPI (data-parallel training): " +
            (dist::MpiSession::available()
                 ? dist::MpiSession::version() + " (mpirun -np N train_images ... trains over N processes)"
                 : std::string("not built in (install libopenmpi-dev and rebuild)")) +
            "\n";
  std::cout << report;
  return report.find("ERROR") == std::string::npos ? 0 : 1;
}

int run_command(Options& o, Ranks& ranks, const FitCallbacks& extra) {
  // --load with no --data and an output: a conversion (to ONNX from any model, to a checkpoint
  // from an ONNX model), nothing trained.
  const bool conversion = !o.load.empty() && !o.given.count("--data") &&
                          (!o.export_onnx.empty() || (!o.save.empty() && is_onnx_file(o.load)));
  const bool inference = o.doctor || o.evaluate || !o.predict.empty() || conversion;
  if (inference && ranks.several())
    throw UsageError("--doctor, --evaluate, --predict and an export alone run in one process: start them without "
                     "mpirun");
  if (!o.predict.empty())
    for (const char* option : {"--data", "--model"})
      if (o.given.count(option))
        throw UsageError(std::string("--predict classifies the images it is given with the model --load describes: "
                                     "leave out ") + option);
  if (o.evaluate || !o.predict.empty())
    for (const char* option : {"--normalize", "--mean", "--std", "--resize-shorter"})
      if (o.given.count(option))
        throw UsageError(std::string(o.evaluate ? "--evaluate" : "--predict") + " brings images to the model as " +
                         o.load + " records (its preprocessing): leave out " + option +
                         " (a conversion, --load X --save Y, records another)");
  if (o.doctor) return doctor();
  if (o.evaluate) return evaluate_command(o);
  if (!o.predict.empty()) return predict_command(o);
  if (inference) return export_command(o);
  // Outside the training loop a first signal ends the run at once, with 128 + the signal, even
  // where the shell started it ignoring SIGINT (a background job); inside it, the run stops at a
  // step boundary, saved (FitOptions::stop_on_signal).
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  return train(o, ranks, extra);
}

// The first word that names no option, with the option it was likely meant to be; empty where
// every option word is known.
std::string unknown_option(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = word.substr(0, word.find('='));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string nearest = nearest_option(name, names);
    return quoted_in_message(name) + " is not an option" +
           (nearest.empty() ? "" : ": did you mean " + nearest + "?") + " (--help lists them)";
  }
  return "";
}

// An option check the library made (Fit's), as the command line says it: led by the flag, and
// each field the message quotes (`validation_split`) named by its flag too.
std::string usage_message(const OptionError& e) {
  const std::string message = with_flags(e.what());
  const std::string flag = flag_of_library_field(e.field());
  return flag.empty() ? message : flag + ": " + message;
}

}  // namespace

int run_train_images(int argc, char** argv, const FitCallbacks& extra) {
  std::optional<Ranks> ranks;
  try {
    ranks.emplace();
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  // Rank 0 alone speaks; the others' errors still reach stderr.
  if (!ranks->writes() && !std::freopen("/dev/null", "w", stdout)) return 1;

  Options o;
  CLI::App app{"train_images: train a convolutional network on images (cnnengine)"};
  add_options(app, o);
  try {
    app.parse(argc, argv);
    check_combinations(o);
    record_given(app, o);
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = unknown_option(app, argc, argv);
        !unknown.empty() && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      std::cerr << ranks->prefix() << "error: " << unknown << "\n";
      return 2;
    }
    // Rank 0 prints help or the error; another rank, its error too (mpirun's MPMD form gives each
    // rank its own command line), named.
    if (ranks->writes()) return app.exit(e) == 0 ? 0 : 2;
    if (e.get_exit_code() == 0) return 0;
    std::cerr << ranks->prefix() << "error: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {  // a check an option's validator leaves to the library
    std::cerr << ranks->prefix() << "error: " << e.what() << "\n";
    return 2;
  }
  try {
    ranks->start(&argc, &argv);
  } catch (const Error& e) {
    ranks->fail(std::string("error: ") + e.what(), 2);
  }
  try {
    return run_command(o, *ranks, extra);
  } catch (const TrainingDiverged& e) {
    ranks->fail(std::string("error: ") + e.what(), 1);  // Fit says what --save holds
  } catch (const OptionError& e) {
    ranks->fail("error: " + usage_message(e), 2);
  } catch (const UsageError& e) {
    ranks->fail(std::string("error: ") + e.what(), 2);
  } catch (const BudgetTooSmall& e) {
    ranks->fail(std::string("error: ") + e.what(), 3);
  } catch (const std::exception& e) {
    ranks->fail(std::string("error: ") + e.what(), 1);
  }
}

}  // namespace cnn::app
