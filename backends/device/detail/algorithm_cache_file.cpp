#include "backends/device/detail/algorithm_cache_file.hpp"

#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

#include <cnnengine/backends/device/device.hpp>
#include "base/atomic_file.hpp"
#include "base/regular_file.hpp"

namespace cnn {
namespace {

namespace fs = std::filesystem;

// A file much larger than kMaxLines lines of choices is not ours: it is left unread.
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{16} << 20;
constexpr std::size_t kMaxLineBytes = 4096;

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

struct Line {
  std::string environment, key, value;
};

// "environment TAB key TAB value"; false for anything else.
bool split_line(const std::string& text, Line& line) {
  const std::size_t first = text.find('\t');
  const std::size_t second = first == std::string::npos ? first : text.find('\t', first + 1);
  if (second == std::string::npos || text.find('\t', second + 1) != std::string::npos) return false;
  line.environment = text.substr(0, first);
  line.key = text.substr(first + 1, second - first - 1);
  line.value = text.substr(second + 1);
  return !line.environment.empty() && !line.key.empty();
}

// The file's lines; false, with `problem` saying why, where the file there is not a cache (it is
// never to be replaced). A missing file is an empty cache.
bool read_lines(const fs::path& path, std::vector<Line>& lines, std::string& problem) {
  lines.clear();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return true;  // the first run: nothing yet
  std::string why = regular_file_problem(path);
  if (why.empty() && (fs::file_size(path, ec) > kMaxFileBytes || ec))
    why = ec ? "cannot be read: " + ec.message() : "is too large for an algorithm cache";
  std::ifstream in;
  std::string text;
  if (why.empty()) {
    in.open(path);
    const std::string header = AlgorithmCacheFile::kHeader;
    if (!in || !std::getline(in, text) || text != header)
      why = "is not a cnnengine algorithm cache (its first line is not \"" + header + "\")";
  }
  if (!why.empty()) {
    problem = path.string() + " " + why;
    return false;
  }
  Line line;
  while (lines.size() < AlgorithmCacheFile::kMaxLines && std::getline(in, text))
    if (text.size() <= kMaxLineBytes && split_line(text, line)) lines.push_back(line);
  return true;
}

}  // namespace

AlgorithmCacheFile::AlgorithmCacheFile(fs::path path, std::string gpu, std::string versions)
    : path_(std::move(path)), gpu_(one_line(std::move(gpu))) {
  environment_ = gpu_ + " | " + one_line(std::move(versions));
}

std::map<std::string, std::string> AlgorithmCacheFile::load() {
  problem_.clear();
  std::map<std::string, std::string> choices;
  std::vector<Line> lines;
  if (!read_lines(path_, lines, problem_)) return choices;
  for (const Line& line : lines)
    if (line.environment == environment_) choices[line.key] = line.value;
  return choices;
}

bool AlgorithmCacheFile::save(const std::map<std::string, std::string>& choices) {
  problem_.clear();
  try {
    // What the file holds now: other GPUs' lines are kept, another process's choices under this
    // environment merged under ours, this GPU's lines under other versions dropped (stale).
    std::vector<Line> lines;
    if (!read_lines(path_, lines, problem_)) {
      problem_ = "cannot keep the algorithm cache: " + problem_ + "; the file there is left as it is";
      return false;
    }
    std::error_code ec;
    if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
    std::map<std::string, std::string> merged;
    std::vector<const Line*> others;
    const std::string same_gpu = gpu_ + " | ";
    for (const Line& line : lines) {
      if (line.environment == environment_) merged[line.key] = line.value;
      else if (line.environment.rfind(same_gpu, 0) != 0) others.push_back(&line);
    }
    for (const auto& [key, value] : choices) merged[key] = value;
    std::string out = std::string(kHeader) + "\n";
    std::size_t written = 0;
    for (const auto& [key, value] : merged) {
      if (written++ == kMaxLines) break;
      out += environment_ + "\t" + one_line(key) + "\t" + one_line(value) + "\n";
    }
    for (const Line* other : others) {
      if (written++ >= kMaxLines) break;
      out += other->environment + "\t" + other->key + "\t" + other->value + "\n";
    }
    AtomicFile file(path_);
    file.write(out.data(), out.size());
    file.commit();
    return true;
  } catch (const std::exception& e) {
    problem_ = "cannot keep the algorithm cache in " + path_.string() + ": " + e.what();
    return false;
  }
}

std::string default_algorithm_cache() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache == '/')
    return (fs::path(cache) / "cnnengine" / "cudnn-algorithms.txt").string();
  if (const char* home = std::getenv("HOME"); home && *home == '/')
    return (fs::path(home) / ".cache" / "cnnengine" / "cudnn-algorithms.txt").string();
  return {};
}

}  // namespace cnn
