#pragma once
// Before anything is read or written: the files a run would write must not be ones it reads, nor
// each other, nor something a stream cannot go to (a FIFO would block forever; a character
// device such as /dev/null is fine).
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::app {

struct PathUse {
  std::string use;  // "--save", "a data file", ...
  std::filesystem::path path;
};

// Throws UsageError naming both uses: two outputs naming one file; an output naming an input
// (`may_overwrite` lists the inputs an output may replace: --save over the checkpoint --load
// or --resume read); an output that exists and is not a regular file.
void check_outputs(const std::vector<PathUse>& outputs, const std::vector<PathUse>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& may_overwrite = {});

}  // namespace cnn::app
