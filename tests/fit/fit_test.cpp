// A whole run in the library (Fit): validation each epoch and the test set at the end, callbacks
// that stop it or change its rate, the watched metric, checkpoints a run resumes from exactly, the
// metrics file, and the options it refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "fit/detail/event_file.hpp"
#include <cnnengine/fit/fit.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/engine/small_images.hpp"

using namespace cnn;
using cnn::data::test::TempFolder;
using cnn::testing::SmallImages;

namespace {

const Shape kImage{1, 12, 12};

FitOptions quiet_options(int epochs = 2) {
  FitOptions o;
  o.epochs = epochs;
  o.batch = 16;
  o.seed = 3;
  o.progress = false;
  o.stop_on_signal = false;
  return o;
}

std::vector<double> train_losses(const FitResult& result) {
  std::vector<double> losses;
  for (const EpochRecord& e : result.history) losses.push_back(e.train_loss);
  return losses;
}

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("fit: validation every epoch, the test set once at the end, the same seed the same run", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(96), test(40);
  auto run = [&] {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = quiet_options();
    o.validation_split = 0.25;
    Fit fit(net, backend, FitData(train, nullptr, &test), o);
    CHECK(fit.training_data().size() == 72);
    REQUIRE(fit.validation_data());
    CHECK(fit.validation_data()->size() == 24);
    return fit.run();
  };
  const FitResult a = run();
  REQUIRE(a.history.size() == 2);
  CHECK(a.epochs_trained == 2);
  CHECK(a.stopped_because.empty());
  CHECK(a.steps == 2 * 5);  // 72 samples in batches of 16: 4 and a last of 8
  for (const EpochRecord& e : a.history) {
    CHECK(e.validation_loss);
    CHECK(e.validation_accuracy);
    CHECK_FALSE(e.test_loss);  // not every epoch: never used to choose
    CHECK(e.learning_rate > 0);
  }
  REQUIRE(a.test);
  CHECK(a.test->samples == 40);
  CHECK(a.best_epoch > 0);  // val_loss, the default watch
  const FitResult b = run();
  CHECK(train_losses(a) == train_losses(b));
  CHECK(a.history.back().validation_loss == b.history.back().validation_loss);
}

TEST_CASE("fit: callbacks see every step, evaluation and epoch, and may stop the run or set its rate", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(64), test(16);
  Network net = make_preset("small", kImage, 4);
  FitOptions o = quiet_options(3);
  o.schedule.kind = ScheduleKind::constant;
  o.optimizer.learning_rate = 1e-3f;
  std::vector<float> rates;
  std::vector<std::string> evaluations;
  int epochs_ended = 0;
  o.callbacks.on_step = [&](const StepReport& r, FitControl& control) {
    rates.push_back(r.learning_rate);
    if (r.step == 10) control.stop("enough steps");
  };
  o.callbacks.on_evaluation = [&](std::string_view split, const EvalResult&, FitControl&) {
    evaluations.emplace_back(split);
  };
  o.callbacks.on_epoch_end = [&](const EpochRecord& e, FitControl& control) {
    ++epochs_ended;
    CHECK(control.progress().epochs.back().epoch == e.epoch);
    CHECK(control.epochs() == 3);
    CHECK(control.batches_per_epoch() == 4);
    if (e.epoch == 1) control.set_learning_rate(2.5e-4f);
  };
  bool started = false;
  o.callbacks.on_start = [&](Trainer& trainer) { started = trainer.steps() == 0; };
  o.validation_split = 0.2;  // 52 to train: 3 batches of 16 and one of 4
  const FitResult result = fit(net, backend, FitData(train, nullptr, &test), o);
  CHECK(started);
  CHECK(result.stopped_because == "enough steps");
  CHECK(result.steps == 10);
  REQUIRE(rates.size() == 10);
  CHECK(rates[3] == Approx(1e-3f));
  CHECK(rates[4] == Approx(2.5e-4f));  // epoch 2's first step
  CHECK(epochs_ended == 2);
  CHECK(evaluations == std::vector<std::string>{"validation", "validation", "test"});
  REQUIRE(result.test);  // the model as it ended, mid-epoch 3
}

TEST_CASE("fit: callbacks are told the run's begin and end, each epoch's begin and each evaluation's course",
          "[fit]") {
  CpuBackend backend(1);
  SmallImages train(64), test(16);
  Network net = make_preset("small", kImage, 4);
  FitOptions o = quiet_options(2);
  o.validation_split = 0.25;  // 48 to train, 16 to validate
  o.batch = 8;        // 2 batches to validate, 2 to test
  std::vector<std::string> events;
  o.callbacks.on_run_begin = [&](FitControl& control) {
    events.push_back("run " + std::to_string(control.progress().epoch));
  };
  o.callbacks.on_epoch_begin = [&](int epoch, FitControl& control) {
    CHECK(control.progress().batches_done == 0);
    events.push_back("epoch " + std::to_string(epoch));
  };
  o.callbacks.on_evaluation_begin = [&](std::string_view split, std::size_t batches, FitControl&) {
    events.push_back(std::string(split) + " of " + std::to_string(batches));
  };
  o.callbacks.on_evaluation_batch = [&](std::string_view split, std::size_t done, FitControl&) {
    events.push_back(std::string(split) + " " + std::to_string(done));
  };
  o.callbacks.on_epoch_end = [&](const EpochRecord& e, FitControl&) {
    events.push_back("end " + std::to_string(e.epoch));
  };
  int steps_at_end = 0;
  o.callbacks.on_run_end = [&](const FitResult& result, FitControl&) {
    events.push_back("done");
    steps_at_end = static_cast<int>(result.steps);
  };
  const FitResult result = fit(net, backend, FitData(train, nullptr, &test), o);
  CHECK(events == std::vector<std::string>{"run 1", "epoch 1", "validation of 2", "validation 1", "end 1", "epoch 2",
                                           "validation of 2", "validation 1", "end 2", "test of 2", "test 1",
                                           "done"});
  CHECK(steps_at_end == result.steps);
}

TEST_CASE("fit: keep_best and early_stop watch the chosen metric, never the test set", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(64), test(16);
  TempFolder scratch;
  // A rate too small to move the validation loss: early stopping ends the run after epoch 2.
  auto stalled = [] {
    FitOptions o = quiet_options(6);
    o.optimizer.learning_rate = 1e-12f;
    o.validation_split = 0.25;
    o.early_stop = 1;
    return o;
  };
  SECTION("a rate too small to move the validation loss: stopped after one epoch without a better one") {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = stalled();
    o.keep_best = true;
    o.restore_best = true;
    o.save = scratch / "run.ckpt";
    const FitResult r = fit(net, backend, FitData(train, nullptr, &test), o);
    CHECK(r.history.size() == 2);
    CHECK(r.best_epoch == 1);
    CHECK(r.tested_epoch == 1);  // the best epoch's weights, restored, for the test set
    REQUIRE(r.test);
    CHECK(read_checkpoint(o.save).training->progress.epochs.size() == 2);  // the run's own is the last epoch's
    CHECK(r.stopped_because.find("early stop: no better val_loss for 1 epoch (the best") == 0);
    CHECK(r.best_checkpoint == scratch / "run.best.ckpt");
    CHECK(std::filesystem::exists(r.best_checkpoint));
    CHECK(read_checkpoint(r.best_checkpoint).training->progress.epochs.size() == 1);
  }
  SECTION("a callback's stop at the epoch early stopping would end stays the run's reason") {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = stalled();
    o.callbacks.on_epoch_end = [](const EpochRecord& e, FitControl& control) {
      if (e.epoch == 2) control.stop("mine");
    };
    const FitResult r = fit(net, backend, FitData(train, nullptr, &test), o);
    CHECK(r.history.size() == 2);
    CHECK(r.stopped_because == "mine");
    REQUIRE(r.test);
  }
  SECTION("the training loss may be watched without a validation set; higher accuracy is better") {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = quiet_options(2);
    o.monitor = MonitoredMetric::train_accuracy;
    o.early_stop = 5;
    const FitResult r = fit(net, backend, FitData(train), o);
    REQUIRE(r.best_value);
    for (const EpochRecord& e : r.history) CHECK(e.train_accuracy <= *r.best_value);
  }
  SECTION("refused") {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = quiet_options();
    o.keep_best = true;
    o.save = scratch / "run.ckpt";
    CHECK_THROWS_WITH(Fit(net, backend, FitData(train, nullptr, &test), o),
                      Catch::Contains("watches val_loss (`monitor`), and this run has no validation set"));
    o.keep_best = false;
    o.restore_best = true;
    CHECK_THROWS_WITH(Fit(net, backend, FitData(train, nullptr, &test), o), Catch::Contains("needs them kept"));
    CHECK_THROWS_WITH(parse_monitored_metric("test_accuracy"), Catch::Contains("never used to choose a model"));
    CHECK_THROWS_WITH(parse_monitored_metric("val_f1"), Catch::Contains("val_loss, val_accuracy, train_loss"));
    for (MonitoredMetric m : {MonitoredMetric::validation_loss, MonitoredMetric::validation_accuracy,
                              MonitoredMetric::train_loss, MonitoredMetric::train_accuracy})
      CHECK(parse_monitored_metric(to_string(m)) == m);
  }
}

TEST_CASE("fit: a run stopped and resumed ends exactly as a run never stopped, on the same validation split",
          "[fit]") {
  CpuBackend backend(1);
  SmallImages train(80), test(16);
  TempFolder scratch;
  auto options = [&](const std::string& name) {
    FitOptions o = quiet_options(3);
    o.validation_split = 0.25;
    o.save = scratch / (name + ".ckpt");
    o.metrics = scratch / (name + ".jsonl");
    return o;
  };
  Network whole_net = make_preset("small-bn", kImage, 4);
  Fit whole(whole_net, backend, FitData(train, nullptr, &test), options("whole"));
  const FitResult uninterrupted = whole.run();

  Network net = make_preset("small-bn", kImage, 4);
  FitOptions first = options("parts");
  first.callbacks.on_step = [](const StepReport& r, FitControl& control) {
    if (r.step == 5) control.stop("a pause mid-epoch");
  };
  const FitResult stopped = fit(net, backend, FitData(train, nullptr, &test), first);
  CHECK(stopped.steps == 5);
  CHECK(stopped.history.size() == 1);

  Network resumed_net = make_preset("small-bn", kImage, 4);
  FitOptions second = options("parts");
  second.validation_split = 0.5;  // the run's own split is taken: recorded in its checkpoint
  second.resume = second.save;
  Fit resumed(resumed_net, backend, FitData(train, nullptr, &test), second);
  CHECK(resumed.validation_data()->size() == 20);
  const FitResult rest = resumed.run();
  CHECK(rest.epochs_trained == 2);
  CHECK(train_losses(rest) == train_losses(uninterrupted));
  CHECK(rest.history.back().validation_loss == uninterrupted.history.back().validation_loss);
  CHECK(resumed.trainer().parameters().download() == whole.trainer().parameters().download());

  // The metrics file of the resumed run holds what the uninterrupted one does, but for timings.
  const std::vector<std::string> a = lines_of(scratch / "whole.jsonl"), b = lines_of(scratch / "parts.jsonl");
  CHECK(a.size() == b.size());
  CHECK(a.back().find("\"type\":\"summary\"") != std::string::npos);

  SECTION("a resumed run that has trained all its epochs trains none, and says so") {
    Network again = make_preset("small-bn", kImage, 4);
    FitOptions third = options("parts");
    third.resume = third.save;
    const FitResult none = fit(again, backend, FitData(train, nullptr, &test), third);
    CHECK(none.epochs_trained == 0);
    CHECK(none.history.size() == 3);
    CHECK(none.test);
  }
}

TEST_CASE("fit: an fp16 run keeps its loss scale and skipped steps in its checkpoint, and resumes exactly", "[fit]") {
  CpuBackend backend(1, Precision::fp16);
  SmallImages train(80);
  TempFolder scratch;
  auto options = [&](const std::string& name) {
    FitOptions o = quiet_options(3);
    o.loss_scale.growth_interval = 1;  // the scale doubles every applied step, until one overflows
    o.save = scratch / (name + ".ckpt");
    return o;
  };
  Network whole_net = make_preset("small", kImage, 4);
  Fit whole(whole_net, backend, FitData(train), options("whole"));
  const FitResult uninterrupted = whole.run();
  CHECK(whole.trainer().skipped_steps() > 0);
  const TrainerState kept = read_checkpoint(scratch / "whole.ckpt").training->trainer;
  CHECK(kept.loss_scale == whole.trainer().loss_scale());
  CHECK(kept.skipped_steps == whole.trainer().skipped_steps());

  Network net = make_preset("small", kImage, 4);
  FitOptions first = options("parts");
  first.callbacks.on_step = [](const StepReport& r, FitControl& control) {
    if (r.step == 7) control.stop("a pause mid-epoch");
  };
  fit(net, backend, FitData(train), first);
  Network resumed_net = make_preset("small", kImage, 4);
  FitOptions second = options("parts");
  second.resume = second.save;
  Fit resumed(resumed_net, backend, FitData(train), second);
  const FitResult rest = resumed.run();
  CHECK(train_losses(rest) == train_losses(uninterrupted));
  CHECK(resumed.trainer().loss_scale() == whole.trainer().loss_scale());
  CHECK(resumed.trainer().skipped_steps() == whole.trainer().skipped_steps());
  CHECK(resumed.trainer().parameters().download() == whole.trainer().parameters().download());
}

TEST_CASE("fit: options it refuses, each named", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(32), validation(8);
  Network net = make_preset("small", kImage, 4);
  auto refused = [&](FitOptions o, const FitData& data, const std::string& why) {
    CHECK_THROWS_WITH(Fit(net, backend, data, std::move(o)), Catch::Contains(why));
  };
  FitOptions o = quiet_options();
  o.epochs = 0;
  refused(o, FitData(train), "at least 1 epoch");
  o = quiet_options();
  o.validation_split = 1.5;
  refused(o, FitData(train), "validation split must be a fraction");
  o.validation_split = 0.2;
  refused(o, FitData(train, &validation), "its own validation set");
  o = quiet_options();
  o.resume = "a.ckpt";
  o.load = "b.ckpt";
  refused(o, FitData(train), "not both");
  o = quiet_options();
  o.keep_best = true;
  refused(o, FitData(train, &validation), "needs a checkpoint path");
  o = quiet_options();
  o.settings = "[1, 2]";
  refused(o, FitData(train), "must be a JSON object");
  for (double warmup : {-1.0, 3.0, std::nan("")}) {
    o = quiet_options();
    o.warmup_epochs = warmup;
    refused(o, FitData(train), "must be from 0 to the run's 2");
  }
  o = quiet_options();
  o.step_every_epochs = std::nan("");
  refused(o, FitData(train), "step schedule's period of nan epochs");
  // A network built for other data: refused naming both, before anything is planned or read (it
  // read past the end of every batch, and its evaluation crashed).
  Network larger = make_preset("small", Shape{1, 16, 16}, 4);
  CHECK_THROWS_WITH(Fit(larger, backend, FitData(train), quiet_options()),
                    Catch::Contains("network takes [1x16x16] samples") && Catch::Contains("gives [1x12x12]"));
  CHECK_THROWS_AS(Fit(larger, backend, FitData(train), quiet_options()), ShapeError);
  Network three = make_preset("small", kImage, 3);
  CHECK_THROWS_WITH(Fit(three, backend, FitData(train), quiet_options()),
                    Catch::Contains("network gives 3 classes") && Catch::Contains("has 4"));
  Network segmenting = make_preset("small", kImage, 4);
  segmenting.set_loss(LossOptions{.task = Task::multilabel});
  CHECK_THROWS_WITH(Fit(segmenting, backend, FitData(train), quiet_options()),
                    Catch::Contains("trained to multilabel") && Catch::Contains("holds classify targets"));
  o = quiet_options();
  o.validation_split = 0.01;  // under one sample a class: every class keeps one aside all the same
  Fit small(net, backend, FitData(train), o);
  CHECK(small.validation_data()->size() == 4);
}

TEST_CASE("fit: a refused option is an OptionError naming its field, for a program to name its own flag", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(32), validation(8);
  TempFolder scratch;
  Network net = make_preset("small", kImage, 4);
  // The field the refusal names; "" where the options were taken.
  auto field_of = [&](FitOptions o, const FitData& data) -> std::string {
    try {
      Fit(net, backend, data, std::move(o));
    } catch (const OptionError& e) {
      return e.field();
    }
    return "";
  };
  FitOptions o = quiet_options();
  o.epochs = 0;
  CHECK(field_of(o, FitData(train)) == "epochs");
  o = quiet_options();
  o.validation_split = 1.5;
  CHECK(field_of(o, FitData(train)) == "validation_split");
  o.validation_split = 0.2;
  CHECK(field_of(o, FitData(train, &validation)) == "validation_split");
  o.limit = 4;  // one sample a class: none left to train on
  CHECK(field_of(o, FitData(train)) == "validation_split");
  o = quiet_options();
  o.warmup_epochs = 3;
  CHECK(field_of(o, FitData(train)) == "warmup_epochs");
  o = quiet_options();
  o.save_every = -1;
  CHECK(field_of(o, FitData(train)) == "save_every");
  o = quiet_options();
  o.batch = 0;
  CHECK(field_of(o, FitData(train)) == "batch");
  o = quiet_options();
  o.loading.augment_crop_padding = 13;  // more than the 12 pixels of a side
  CHECK(field_of(o, FitData(train)) == "loading.augment_crop_padding");
  // The batch and seed are the trainer's, given once: a loader's own, set apart, would be ignored.
  o = quiet_options();
  o.loading.batch = 8;
  CHECK(field_of(o, FitData(train)) == "loading.batch");
  o.loading.batch = o.batch;  // the same: nothing to ignore
  CHECK(field_of(o, FitData(train)).empty());
  o.loading.seed = 9;
  CHECK(field_of(o, FitData(train)) == "loading.seed");
  o = quiet_options();
  o.settings = "[1, 2]";
  CHECK(field_of(o, FitData(train)) == "settings");
  o = quiet_options();
  o.monitor = MonitoredMetric::validation_mean_iou;  // a classifier's scores have none
  CHECK(field_of(o, FitData(train, &validation)) == "monitor");
  // A watched metric without validation data: the option that watches it.
  o = quiet_options();
  o.early_stop = 2;
  CHECK(field_of(o, FitData(train)) == "early_stop");
  o.save = scratch / "run.ckpt";
  o.keep_best = true;
  CHECK(field_of(o, FitData(train)) == "keep_best");
  o = quiet_options();
  o.schedule.kind = ScheduleKind::plateau;
  CHECK(field_of(o, FitData(train)) == "schedule.kind");
  // What the run writes.
  o = quiet_options();
  o.csv = scratch.path();
  CHECK(field_of(o, FitData(train)) == "csv");
  o = quiet_options();
  o.metrics = o.csv = scratch / "epochs.log";
  CHECK(field_of(o, FitData(train)) == "csv");
  // A resumed run: its validation split and its classes' order.
  o = quiet_options(1);
  o.save = scratch / "run.ckpt";
  fit(net, backend, FitData(train), o);
  FitOptions resume = quiet_options(2);
  resume.resume = o.save;
  resume.validation_split = 0.25;
  CHECK(field_of(resume, FitData(train)) == "validation_split");
  resume.validation_split = 0;
  const std::unique_ptr<data::Dataset> renamed =
      data::with_class_names(std::make_unique<SmallImages>(32), {"d", "c", "b", "a"});
  CHECK(field_of(resume, FitData(*renamed)) == "resume");
  CHECK(field_of(resume, FitData(train)).empty());
}

TEST_CASE("fit: the plateau schedule multiplies the rate after patience epochs without a better value, kept on resume",
          "[fit]") {
  CpuBackend backend(1);
  SmallImages train(48);
  TempFolder scratch;
  Network net = make_preset("small", kImage, 4);
  FitOptions o = quiet_options(3);
  o.optimizer.learning_rate = 1e-12f;  // too small to move the loss: no epoch is better
  o.schedule.kind = ScheduleKind::plateau;
  o.schedule.plateau_patience = 0;
  o.schedule.plateau_factor = 0.5f;
  o.schedule.warmup_steps = 0;
  o.monitor = MonitoredMetric::train_loss;
  o.save = scratch / "plateau.ckpt";
  std::vector<float> rates;
  o.callbacks.on_step = [&](const StepReport& r, FitControl&) { rates.push_back(r.learning_rate); };
  Fit run(net, backend, FitData(train), o);
  run.run();
  REQUIRE(rates.size() == 9);
  CHECK(rates[2] == Approx(1e-12f));
  CHECK(rates[3] == Approx(1e-12f));  // epoch 1 set the best
  CHECK(rates[6] == Approx(5e-13f));  // epoch 2 was no better: halved
  CHECK(run.trainer().learning_rate_scale() == 0.25f);
  CHECK(read_checkpoint(o.save).training->trainer.learning_rate_scale == 0.25f);

  FitOptions without = quiet_options(2);
  without.schedule.kind = ScheduleKind::plateau;
  CHECK_THROWS_WITH(Fit(net, backend, FitData(train), without), Catch::Contains("the plateau schedule watches val_loss"));
}

TEST_CASE("the learning-rate range test raises the rate each step and suggests where the loss falls fastest", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(256);
  Network net = make_preset("small", kImage, 4);
  FitOptions o = quiet_options();
  LearningRateRangeOptions r;
  r.start = 1e-6f;
  r.end = 1.0f;
  r.steps = 30;
  const LearningRateRange range = find_learning_rate(net, backend, train, o, r);
  REQUIRE(range.rates.size() >= 5);
  CHECK(range.rates.size() == range.losses.size());
  CHECK(range.rates.front() == Approx(1e-6f));
  for (std::size_t i = 1; i < range.rates.size(); ++i) CHECK(range.rates[i] > range.rates[i - 1]);
  if (range.rates.size() == 30) {
    CHECK(range.rates.back() == Approx(1.0f));
    CHECK(range.ended == "the last rate");
  }
  CHECK(range.suggestion >= 1e-6f);
  CHECK(range.suggestion <= 1.0f);
  CHECK(range.lowest_loss_rate > 0);
  r.end = r.start;
  CHECK_THROWS_WITH(find_learning_rate(net, backend, train, o, r), Catch::Contains("0 < start < end"));
}

TEST_CASE("CRC-32C, as TFRecord checks TensorBoard's event files", "[fit]") {
  const std::string check = "123456789";
  CHECK(detail::crc32c(check.data(), check.size()) == 0xE3069283u);  // the standard check value
  CHECK(detail::crc32c(nullptr, 0) == 0u);
}

TEST_CASE("fit: what a run writes is checked against what it reads before anything is planned", "[fit]") {
  TempFolder dir;
  namespace t = cnn::data::test;
  const std::filesystem::path data = dir / "idx";
  std::filesystem::create_directories(data);
  t::write_bytes(data / "train-images-idx3-ubyte", t::idx_images(32, 12, 12));
  t::write_bytes(data / "train-labels-idx1-ubyte", t::idx_labels(32, 4));
  t::write_bytes(data / "t10k-images-idx3-ubyte", t::idx_images(8, 12, 12));
  t::write_bytes(data / "t10k-labels-idx1-ubyte", t::idx_labels(8, 4));
  const data::DatasetSplits splits = data::open_dataset(data);
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  auto refused = [&](FitOptions o, const std::string& why) {
    CHECK_THROWS_WITH(Fit(net, backend, FitData(splits), std::move(o)), Catch::Contains(why));
  };
  FitOptions o = quiet_options(1);
  o.save = data / "t10k-labels-idx1-ubyte";
  refused(o, "FitOptions::save (" + o.save.string() + ") would overwrite a data file");
  o = quiet_options(1);
  o.save = data / "run.ckpt";
  refused(o, "is inside the data folder");
  o = quiet_options(1);
  o.tensorboard = data;
  refused(o, "FitOptions::tensorboard " + data.string() + " is the data folder");
  o = quiet_options(1);
  o.csv = dir.path();
  refused(o, "FitOptions::csv " + dir.path().string() + ": it is a folder");
  std::ofstream(dir / "notes.txt") << "not a checkpoint\n";
  o = quiet_options(1);
  o.save = dir / "notes.txt";
  refused(o, "it exists and is not a cnnengine checkpoint (give FitOptions::overwrite");
  CHECK(lines_of(dir / "notes.txt") == std::vector<std::string>{"not a checkpoint"});
  CHECK(std::filesystem::file_size(data / "t10k-labels-idx1-ubyte") > 0);
  CHECK_FALSE(std::filesystem::exists(data / "run.ckpt"));

  // Another run's checkpoint is work: replaced with overwrite, continued with resume.
  o = quiet_options(1);
  o.save = dir / "run.ckpt";
  fit(net, backend, FitData(splits), o);
  refused(o, "holds another run's checkpoint: FitOptions::resume = " + o.save.string() + " continues that run");
  o.overwrite = true;
  fit(net, backend, FitData(splits), o);
  FitOptions resumed = quiet_options(2);
  resumed.resume = resumed.save = dir / "run.ckpt";
  CHECK(fit(net, backend, FitData(splits), resumed).epochs_trained == 1);
}

namespace {

// 8 x 8 segmentation masks of one value each, every pixel `value`.
class FlatMasks final : public data::Dataset {
 public:
  FlatMasks(std::size_t count, std::uint8_t value) : count_(count), value_(value) {}
  std::size_t size() const override { return count_; }
  data::SampleShape shape() const override { return {1, 8, 8}; }
  Task task() const override { return Task::segment; }
  int num_classes() const override { return 3; }
  std::vector<std::string> class_names() const override { return {"a", "b", "c"}; }
  std::string description() const override { return "flat masks"; }
  std::size_t host_bytes() const override { return 0; }
  int load(std::size_t index, float* out) const override {
    for (int k = 0; k < 64; ++k) out[k] = static_cast<float>((index + static_cast<std::size_t>(k)) % 5) / 5.f;
    return 0;
  }
  void load_target(std::size_t, void* out) const override { std::memset(out, value_, 64); }

 private:
  std::size_t count_;
  std::uint8_t value_;
};

Network segmenter(std::vector<float> class_weights = {}) {
  Network net = parse_network("conv 8 3 pad=1\nrelu\nconv 3 1\n", Shape{1, 8, 8}, 3);
  net.set_loss(LossOptions{.task = Task::segment, .class_weights = std::move(class_weights)});
  return net;
}

}  // namespace

TEST_CASE("fit: a segmentation with no pixel to learn from is refused, not trained to a loss of 0", "[fit]") {
  CpuBackend backend(1);
  const FlatMasks ignored(16, kIgnoreMask), class_one(16, 1);
  Network net = segmenter();
  CHECK_THROWS_WITH(Fit(net, backend, FitData(ignored), quiet_options(1)),
                    Catch::Contains("every pixel of the 16 training masks") && Catch::Contains("nothing to learn"));
  Network weighing_nothing = segmenter({1, 0, 1});
  CHECK_THROWS_WITH(Fit(weighing_nothing, backend, FitData(class_one), quiet_options(1)),
                    Catch::Contains("of a class whose weight is 0"));
  Network all_zero = segmenter({0, 0, 0});
  CHECK_THROWS_WITH(Fit(all_zero, backend, FitData(class_one), quiet_options(1)),
                    Catch::Contains("every one is 0"));
  Network fine = segmenter({1, 2, 1});
  CHECK(fit(fine, backend, FitData(class_one), quiet_options(1)).epochs_trained == 1);
}

TEST_CASE("fit: frozen layers unfreeze at an epoch, and a run stopped on either side of it resumes exactly",
          "[fit][freeze]") {
  CpuBackend backend(1);
  SmallImages train(64), test(16);
  TempFolder scratch;
  const int frozen = make_preset("small-bn", kImage, 4).last() - 1;
  auto frozen_net = [&] {
    Network net = make_preset("small-bn", kImage, 4);
    net.freeze_through(frozen);
    return net;
  };
  auto options = [&](const std::string& name) {
    FitOptions o = quiet_options(3);
    o.unfreeze_at = 2;
    o.save = scratch / (name + ".ckpt");
    return o;
  };
  Network whole_net = frozen_net();
  Fit whole(whole_net, backend, FitData(train, nullptr, &test), options("whole"));
  const std::vector<float> start = whole.trainer().parameters().download();
  const FitResult uninterrupted = whole.run();
  CHECK(whole_net.frozen_through() == 0);
  const std::vector<float> end = whole.trainer().parameters().download();
  for (const ParameterStore::Place& p : ParameterStore::places(whole_net))
    if (p.name == "weight") CHECK(end[p.offset] != start[p.offset]);  // every layer trained in the end

  // Stopped in epoch 1 (frozen) and in epoch 3 (unfrozen), each resumed to the end.
  for (const long stop_at : {2L, 10L}) {
    INFO("stopped at step " << stop_at);
    const std::string name = "parts" + std::to_string(stop_at);
    Network net = frozen_net();
    FitOptions first = options(name);
    first.callbacks.on_step = [stop_at](const StepReport& r, FitControl& control) {
      if (r.step == stop_at) control.stop("a pause");
    };
    fit(net, backend, FitData(train, nullptr, &test), first);
    Network resumed_net = frozen_net();
    FitOptions second = options(name);
    second.resume = second.save;
    Fit resumed(resumed_net, backend, FitData(train, nullptr, &test), second);
    const FitResult rest = resumed.run();
    CHECK(train_losses(rest) == train_losses(uninterrupted));
    CHECK(resumed.trainer().parameters().download() == end);
  }

  SECTION("a budget that holds the frozen network but not the whole one is refused before step 1") {
    // resnet18's 11 million parameters: 45 MiB, and four times that trained whole (gradients,
    // AdamW's two slots).
    Network net = make_preset("resnet18", kImage, 4);
    net.freeze_through(net.last() - 1);
    FitOptions o = options("tight");
    o.memory_budget = std::size_t{100} << 20;
    o.callbacks.on_step = [](const StepReport&, FitControl&) { FAIL("a step ran"); };
    CHECK_THROWS_WITH(Fit(net, backend, FitData(train, nullptr, &test), o),
                      Catch::Matchers::Contains("unfreezing at epoch 2: the memory budget of 100.00 MiB"));
    CHECK(net.frozen_through() == net.last() - 1);
    o.unfreeze_at = 0;
    CHECK_NOTHROW(Fit(net, backend, FitData(train, nullptr, &test), o));
  }

  SECTION("unfreezing needs frozen layers and an epoch of the run") {
    Network plain = make_preset("small-bn", kImage, 4);
    FitOptions o = options("refused");
    CHECK_THROWS_WITH(Fit(plain, backend, FitData(train, nullptr, &test), o),
                      Catch::Matchers::Contains("needs frozen layers"));
    Network net = frozen_net();
    o.unfreeze_at = 4;
    CHECK_THROWS_WITH(Fit(net, backend, FitData(train, nullptr, &test), o),
                      Catch::Matchers::Contains("from 1 to the run's 3"));
  }
}

TEST_CASE("fit: evaluation sees the images unaugmented, whatever the training's photo augmentations", "[fit][photo]") {
  CpuBackend backend(1);
  SmallImages train(64), test(24);
  auto run = [&](bool augmented) {
    Network net = make_preset("small", kImage, 4);
    FitOptions o = quiet_options(1);
    o.optimizer.learning_rate = 1e-30f;  // the weights stay as initialised: only the data differs
    o.validation_split = 0.25;
    if (augmented) {
      o.loading.photo.crop.enabled = true;
      o.loading.photo.jitter = {0.9f, 0.9f, 0.9f};
      o.loading.photo.erasing.probability = 1;
      o.loading.threads = 2;
    }
    return Fit(net, backend, FitData(train, nullptr, &test), o).run();
  };
  const FitResult plain = run(false), augmented = run(true);
  REQUIRE(plain.test);
  REQUIRE(augmented.test);
  CHECK(augmented.test->loss == plain.test->loss);
  CHECK(augmented.history[0].validation_loss == plain.history[0].validation_loss);
  CHECK(augmented.history[0].train_loss != plain.history[0].train_loss);
  // Each epoch records the share of its loop spent waiting for data, and the loader's rate.
  REQUIRE(augmented.history[0].data_wait_share);
  CHECK(*augmented.history[0].data_wait_share >= 0);
  CHECK(*augmented.history[0].data_wait_share <= 1);
  REQUIRE(augmented.history[0].loader_images_per_second);
  CHECK(*augmented.history[0].loader_images_per_second > 0);
}
