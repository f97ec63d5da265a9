#pragma once
// The one check of what a run or a command writes, made before any work (training, evaluating,
// exporting): a Fit passes its checkpoints and logs with the data it reads, and every command of
// train_images all it would write and all it reads. Nothing written may destroy an input, another
// output, a device or an unrelated file, and every output can be written where it goes, so that
// no run trains for an hour and then fails to write its result.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <cnnengine/data/dataset.hpp>
#include <cnnengine/fit/output_kinds.hpp>

namespace cnn {

// What a command reads: a file, or a folder read whole (an image folder, a --predict folder),
// inside which nothing may be written (the next run would read it as data).
struct PathUse {
  std::string use;  // "--load", "a data file", ...
  std::filesystem::path path;
};

// A data set's inputs: each file it reads and the folder it was opened from, read whole (an image
// written among the images would be read by the next run; a file beside IDX files changes what
// the data set's identity, and a resumed run, finds there). `option` names the folder in messages
// as the caller's user gave it ("--data"), where there is one.
std::vector<PathUse> data_inputs(const data::DatasetSplits& splits, const std::string& option = "");

struct OutputUse {
  std::string use;  // "--save", "--plot", ...
  std::filesystem::path path;
  OutputKind kind;
  // The option's field in its options struct ("save", "metrics"), where it has one: refusals are
  // then OptionErrors naming it.
  std::string field = {};
};

struct RunFiles {
  std::vector<OutputUse> outputs;
  std::vector<PathUse> inputs;
  // An output may replace an existing file of another kind, or another run's checkpoint; and how
  // the caller's user says so, and continues a run, for the messages.
  bool overwrite = false;
  std::string overwrite_option = "--overwrite", resume_option = "--resume";
  // (output use, input use) pairs where the output may replace the input: --save over the
  // checkpoint --load or --resume read.
  std::vector<std::pair<std::string, std::string>> may_replace;
  // Checkpoints that are the run's own, which it goes on saving: a resumed run's file and the best
  // one beside it. Any other checkpoint is another run's work, replaced only with overwrite.
  std::vector<std::filesystem::path> own_checkpoints;
};

// Throws ConfigError naming the output, its path and what is wrong. A folder output (--tensorboard):
// a file where it should be, an input there or around it, nowhere to make it. A file: no name;
// a folder, socket, block device or FIFO; any device for an output replaced by rename (a
// stream, --metrics-out or --trace, may go to /dev/null, or to /dev/stdout, a terminal or a
// pipe); two outputs naming one file (streams may share a device or our pipe); an
// output naming an input or inside an input folder; an existing file that is not what the
// output writes, or another run's checkpoint, without --overwrite; a folder that does not exist
// or takes no new file (the temporary a rename needs is created there and removed).
//
// A symbolic link is written through, as AtomicFile writes (and --save always did): the file
// it names is what is checked and replaced, and the link is kept, so a link such as
// latest.png -> run7/curves.png keeps naming the run's plot.
void check_run_files(const RunFiles& files);

}  // namespace cnn
