#include "data_identity.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "usage_error.hpp"

namespace cnn::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Crc {
 public:
  void add(const void* bytes, std::size_t size) {
    crc_ = crc32(crc_, static_cast<const Bytef*>(bytes), static_cast<uInt>(size));
  }
  void add(const std::string& text) { add(text.data(), text.size() + 1); }  // with its '\0': names apart
  std::string hex() const {
    char text[9];
    std::snprintf(text, sizeof text, "%08lx", crc_);
    return text;
  }

 private:
  uLong crc_ = crc32(0, nullptr, 0);
};

// Adds up to `budget` bytes of `file` (its first ones), returning how many it read.
std::uintmax_t add_bytes(Crc& crc, const fs::path& file, std::uintmax_t budget) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> chunk(1 << 20);
  std::uintmax_t read = 0;
  while (read < budget && in) {
    in.read(chunk.data(), static_cast<std::streamsize>(std::min<std::uintmax_t>(chunk.size(), budget - read)));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    crc.add(chunk.data(), got);
    read += got;
  }
  if (in.bad()) throw DataError(file.string() + ": read error while identifying the data set");
  return read;
}

std::string joined(const json& names) {
  std::string text;
  for (const json& name : names)
    text += (text.empty() ? "" : ", ") + (name.is_string() ? name.get<std::string>() : name.dump());
  return text;
}

}  // namespace

json data_identity(const std::string& folder, const data::DatasetSplits& splits) {
  const fs::path root = fs::absolute(folder).lexically_normal();
  std::vector<std::pair<std::string, fs::path>> files;  // name relative to the folder, path
  for (const fs::path& file : splits.files)
    files.emplace_back(fs::absolute(file).lexically_normal().lexically_relative(root).generic_string(), file);
  std::sort(files.begin(), files.end());
  Crc crc;
  std::uintmax_t hashed = 0, total = 0;
  for (const auto& [name, path] : files) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) throw DataError(path.string() + ": cannot read its size: " + ec.message());
    crc.add(name);
    crc.add(&size, sizeof size);
    hashed += add_bytes(crc, path, std::min(size, kHashedBytes - hashed));
    total += size;
  }
  return {{"kind", splits.kind},
          {"training_samples", splits.train->size()},
          {"test_samples", splits.test->size()},
          {"classes", splits.train->class_names()},
          {"files", files.size()},
          {"bytes", total},
          {"crc32", crc.hex()}};
}

void require_same_data(const json& recorded, const std::string& recorded_folder, const json& now,
                       const std::string& folder) {
  std::string difference;
  auto differs = [&](const char* key, const std::string& what) {
    if (difference.empty() && recorded.value(key, json()) != now.value(key, json()))
      difference = what + " " + recorded.value(key, json()).dump() + " against " + now.value(key, json()).dump();
  };
  differs("kind", "its kind:");
  differs("training_samples", "training samples:");
  differs("test_samples", "test samples:");
  if (difference.empty() && recorded.value("classes", json()) != now.value("classes", json()))
    difference = "classes: " + joined(recorded.value("classes", json::array())) + " against " + joined(now.at("classes"));
  differs("files", "files:");
  differs("bytes", "bytes:");
  differs("crc32", "the files' CRC-32:");
  if (difference.empty()) return;
  throw UsageError("--data " + folder + " is not the data set the run trained on (" + recorded_folder + "): " +
                   difference + " (the run's, then this one's); a resumed run continues on its own data");
}

}  // namespace cnn::app
