#pragma once
// The file that keeps measured choices between processes (train_images --algo-cache: the cuDNN
// convolution algorithms each shape ran fastest with), so that a later process on the same GPU,
// driver and libraries starts without measuring again.
//
// A text file: a header line, then one line per choice, "environment TAB key TAB value". The
// environment names the GPU and every version that can change a measurement (driver, CUDA
// runtime, cuDNN); a reader takes only its own environment's lines, so a changed driver or
// library leaves the old ones unused. A save rewrites the file atomically with this
// environment's choices and the other environments' lines (several GPUs may share one file),
// dropping the lines of this GPU under other versions. A file that does not start with the
// header is not a cache: it is neither read nor replaced.
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>

namespace cnn {

class AlgorithmCacheFile {
 public:
  // `gpu` names the device (it may hold spaces, no tab or newline); `versions` the driver and
  // libraries. Touches no file.
  AlgorithmCacheFile(std::filesystem::path path, std::string gpu, std::string versions);

  // This environment's choices; empty where the file is missing, unreadable or not a cache (say
  // why in problem()). Never throws.
  std::map<std::string, std::string> load();
  // Writes `choices` for this environment, keeping the file's lines of other GPUs (at most
  // kMaxLines in all). False, with problem() saying why, where it cannot; never throws.
  bool save(const std::map<std::string, std::string>& choices);

  const std::filesystem::path& path() const { return path_; }
  // Why the last load or save did not use the file; empty when it did.
  const std::string& problem() const { return problem_; }

  static constexpr std::size_t kMaxLines = 20000;
  static constexpr const char* kHeader = "cnnengine measured algorithms 1";

 private:
  std::filesystem::path path_;
  std::string gpu_, environment_;
  std::string problem_;
};

}  // namespace cnn
