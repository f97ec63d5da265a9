#include "output_paths.hpp"

#include <algorithm>
#include <system_error>

#include "cnnengine/base/regular_file.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

namespace fs = std::filesystem;

// One file under two names: the same path once symbolic links are followed, or (for files that
// exist) the same file by device and inode (a hard link).
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec) return true;
  const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
  return ca == cb;
}

std::string described(const PathUse& p) { return p.use + " (" + p.path.string() + ")"; }

}  // namespace

void check_outputs(const std::vector<PathUse>& outputs, const std::vector<PathUse>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& may_overwrite) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const PathUse& out = outputs[i];
    // A character device takes a stream (/dev/null, /dev/stdout); a FIFO would block until a
    // reader comes, a folder or a socket takes no file.
    std::error_code ec;
    const fs::file_type type = fs::status(out.path, ec).type();
    if (!ec && type != fs::file_type::not_found && type != fs::file_type::character)
      if (const std::string problem = regular_file_problem(out.path); !problem.empty())
        throw UsageError(out.use + " " + out.path.string() + ": it " + problem);
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(out.path, outputs[j].path))
        throw UsageError(out.use + " and " + outputs[j].use + " name the same file, " + out.path.string() +
                         ": one would overwrite the other");
    for (const PathUse& in : inputs) {
      const bool allowed = std::find(may_overwrite.begin(), may_overwrite.end(), std::pair(out.use, in.use)) !=
                           may_overwrite.end();
      if (!allowed && same_file(out.path, in.path))
        throw UsageError(described(out) + " would overwrite " + described(in) + ": write it elsewhere");
    }
  }
}

}  // namespace cnn::app
