#include "cnnengine/backends/device/detail/algorithm_cache_file.hpp"

#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

#include "cnnengine/backends/device/device.hpp"
#include "cnnengine/base/detail/atomic_file.hpp"
#include "cnnengine/base/regular_file.hpp"

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

}  // namespace

AlgorithmCacheFile::AlgorithmCacheFile(fs::path path, std::string gpu, std::string versions)
    : path_(std::move(path)), gpu_(one_line(std::move(gpu))) {
  environment_ = gpu_ + " | " + one_line(std::move(versions));
}

std::map<std::string, std::string> AlgorithmCacheFile::load() {
  problem_.clear();
  std::map<std::string, std::string> choices;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path_, ec))) return choices;  // the first run: nothing yet
  if (const std::string why = regular_file_problem(path_); !why.empty()) {
    problem_ = path_.string() + " " + why;
    return choices;
  }
  if (fs::file_size(path_, ec) > kMaxFileBytes || ec) {
    problem_ = path_.string() + (ec ? " cannot be read: " + ec.message() : " is too large for an algorithm cache");
    return choices;
  }
  std::ifstream in(path_);
  std::string text;
  if (!in || !std::getline(in, text) || text != kHeader) {
    problem_ = path_.string() + " is not a cnnengine algorithm cache (its first line is not \"" + kHeader + "\")";
    return choices;
  }
  Line line;
  while (std::getline(in, text))
    if (text.size() <= kMaxLineBytes && split_line(text, line) && line.environment == environment_)
      choices[line.key] = line.value;
  return choices;
}

bool AlgorithmCacheFile::save(const std::map<std::string, std::string>& choices) {
  problem_.clear();
  try {
    std::error_code ec;
    const bool exists = fs::exists(fs::symlink_status(path_, ec));
    // What the file holds now: other environments' lines are kept, another process's choices
    // under this one merged under ours.
    std::vector<std::string> others;
    std::map<std::string, std::string> merged;
    if (exists) {
      if (const std::string why = regular_file_problem(path_); !why.empty()) {
        problem_ = "cannot keep the algorithm cache in " + path_.string() + ": it " + why;
        return false;
      }
      std::ifstream in(path_);
      std::string text;
      if (!in || !std::getline(in, text) || text != kHeader) {
        problem_ = "cannot keep the algorithm cache in " + path_.string() +
                   ": the file there is not one, and is left as it is";
        return false;
      }
      const std::string same_gpu = gpu_ + " | ";
      Line line;
      while (others.size() + merged.size() < kMaxLines && std::getline(in, text)) {
        if (text.size() > kMaxLineBytes || !split_line(text, line)) continue;
        if (line.environment == environment_) merged[line.key] = line.value;
        else if (line.environment.rfind(same_gpu, 0) != 0) others.push_back(text);  // this GPU, other versions: stale
      }
    } else if (path_.has_parent_path()) {
      fs::create_directories(path_.parent_path(), ec);
    }
    for (const auto& [key, value] : choices) merged[key] = value;
    std::string out = std::string(kHeader) + "\n";
    std::size_t lines = 0;
    for (const auto& [key, value] : merged) {
      if (lines++ == kMaxLines) break;
      out += environment_ + "\t" + one_line(key) + "\t" + one_line(value) + "\n";
    }
    for (const std::string& other : others) {
      if (lines++ >= kMaxLines) break;
      out += other + "\n";
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
