#include <cnnengine/fit/output_files.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "base/atomic_file.hpp"
#include <cnnengine/base/error.hpp>
#include "base/regular_file.hpp"

namespace cnn {
namespace {

namespace fs = std::filesystem;

// One file under two names: the same path once symbolic links are followed, or (for files that
// exist) the same file by device and inode (a hard link).
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec) return true;
  return resolve_links(a) == resolve_links(b);
}

// Whether `path` (links followed) lies anywhere below the folder `folder`.
bool inside_folder(const fs::path& path, const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return false;
  const fs::path file = resolve_links(path), root = resolve_links(folder);
  const auto [end_of_root, in_file] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  return end_of_root == root.end() && in_file != file.end();
}

// Our own standard output or error, when it is a pipe (/dev/stdout piped into another program):
// its reader is there while we run. Another FIFO is refused: opening one with no reader blocks,
// and a check that opened one to see would end a reader such as `cat < fifo`.
bool our_own_pipe(const fs::path& path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0 || !S_ISFIFO(target.st_mode)) return false;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat ours {};
    if (::fstat(fd, &ours) == 0 && ours.st_dev == target.st_dev && ours.st_ino == target.st_ino) return true;
  }
  return false;
}

// What a stream (--metrics-out, --trace) may go to besides a file, and may share with another:
// a character device (/dev/null, a terminal's /dev/stdout) or our own pipe.
bool stream_target(const fs::path& path) {
  std::error_code ec;
  return fs::status(path, ec).type() == fs::file_type::character || our_own_pipe(path);
}

std::string named(const OutputUse& out) { return out.use + " " + out.path.string(); }

// Refuses an output: an OptionError naming its field where it has one.
[[noreturn]] void refuse(const OutputUse& out, const std::string& message) {
  if (out.field.empty()) throw ConfigError(message);
  throw OptionError(out.field, message);
}

// What the path holds that this output cannot be written to; empty where it can.
std::string type_problem(const OutputUse& out) {
  std::error_code ec;
  const fs::file_type type = fs::status(out.path, ec).type();  // links followed
  if (type == fs::file_type::not_found || type == fs::file_type::regular) return {};
  // A rename over a device or a pipe would put a regular file in its place (as root, over
  // /dev/null).
  if (replaced_by_rename(out.kind) && (type == fs::file_type::character || type == fs::file_type::fifo))
    return "is a " + std::string(type == fs::file_type::fifo ? "FIFO (named pipe)" : "device") +
           ": it would be replaced by a file; write to a file";
  if (stream_target(out.path)) return {};
  if (type == fs::file_type::fifo)
    return "is a FIFO (named pipe): the run would wait for a reader, forever if none comes; write to a file (a "
           "stream may go to /dev/stdout)";
  return regular_file_problem(out.path);
}

// The folder the output is written in exists and takes a new file: the temporary a rename
// needs is created there (and removed), so a read-only or missing folder fails now, not after
// training.
void check_writable(const OutputUse& out) {
  if (stream_target(out.path)) return;
  std::error_code ec;
  const fs::path target = resolve_links(out.path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec))
    refuse(out, named(out) + ": the folder " + folder.string() + " does not exist");
  try {
    AtomicFile probe(target);
  } catch (const Error& e) {
    refuse(out, named(out) + ": " + e.what());
  }
}

// A folder that new files go into (made where missing): never a file, never an input folder or
// inside one (the next run would read what is written there as data), and one where a file can
// be made.
void check_folder_output(const RunFiles& files, const OutputUse& out) {
  if (out.path.empty()) refuse(out, out.use + ": give a folder");
  std::error_code ec;
  const fs::file_type type = fs::status(out.path, ec).type();
  if (type != fs::file_type::not_found && type != fs::file_type::directory)
    refuse(out, named(out) + ": it exists and is not a folder");
  for (const PathUse& in : files.inputs) {
    const std::string input = in.use + " (" + in.path.string() + ")";
    if (same_file(out.path, in.path))
      refuse(out, named(out) + " is " + input + ": what it writes there would be read as input; write it elsewhere");
    if (inside_folder(out.path, in.path))
      refuse(out, named(out) + " is inside " + input + ", which is read whole: write it elsewhere");
  }
  // Made now, as its writer would make it, so that a folder that cannot be made or takes no file
  // fails before any work.
  fs::create_directories(out.path, ec);
  if (ec) refuse(out, named(out) + ": cannot be made: " + ec.message());
  try {
    AtomicFile probe(resolve_links(out.path) / "probe");
  } catch (const Error& e) {
    refuse(out, named(out) + ": " + e.what());
  }
}

bool may_replace(const RunFiles& files, const OutputUse& out, const PathUse& in) {
  return std::find(files.may_replace.begin(), files.may_replace.end(), std::pair(out.use, in.use)) !=
         files.may_replace.end();
}

bool run_owns(const RunFiles& files, const fs::path& checkpoint) {
  return std::any_of(files.own_checkpoints.begin(), files.own_checkpoints.end(),
                     [&](const fs::path& own) { return same_file(own, checkpoint); });
}

}  // namespace

std::vector<PathUse> data_inputs(const data::DatasetSplits& splits, const std::string& option) {
  std::vector<PathUse> inputs;
  for (const fs::path& file : splits.files) inputs.push_back({"a data file", file});
  if (!splits.folder.empty())
    inputs.push_back({std::string(splits.kind == "image-folder" ? "the image folder" : "the data folder") +
                          (option.empty() ? "" : " " + option),
                      splits.folder});
  return inputs;
}

void check_run_files(const RunFiles& files) {
  for (std::size_t i = 0; i < files.outputs.size(); ++i) {
    const OutputUse& out = files.outputs[i];
    if (out.kind == OutputKind::folder) {
      check_folder_output(files, out);
      continue;
    }
    if (out.path.empty() || !out.path.has_filename()) refuse(out, named(out) + ": give a file name");
    if (const std::string problem = type_problem(out); !problem.empty()) refuse(out, named(out) + ": it " + problem);
    for (std::size_t j = 0; j < i; ++j)
      if (!stream_target(out.path) && same_file(out.path, files.outputs[j].path))
        refuse(out, out.use + " and " + files.outputs[j].use + " name the same file, " + out.path.string() +
                        ": one would overwrite the other");
    bool replaces_an_input = false;
    for (const PathUse& in : files.inputs) {
      const std::string input = in.use + " (" + in.path.string() + ")";
      if (inside_folder(out.path, in.path))
        refuse(out, named(out) + " is inside " + input + ", which is read whole: write it elsewhere");
      if (!same_file(out.path, in.path)) continue;
      if (!may_replace(files, out, in))
        refuse(out, out.use + " (" + out.path.string() + ") would overwrite " + input + ": write it elsewhere");
      replaces_an_input = true;
    }
    std::error_code ec;
    if (!files.overwrite && !replaces_an_input && fs::is_regular_file(out.path, ec)) {
      if (!holds_output_of_kind(out.path, out.kind))
        refuse(out, named(out) + ": it exists and is not " + describe(out.kind) + " (give " + files.overwrite_option +
                        " to replace it)");
      if (out.kind == OutputKind::checkpoint && !run_owns(files, out.path))
        refuse(out, named(out) + ": it holds another run's checkpoint: " + files.resume_option + " " +
                        out.path.string() + " continues that run; give " + files.overwrite_option +
                        " to replace it, or another file");
    }
    check_writable(out);
  }
}

}  // namespace cnn
