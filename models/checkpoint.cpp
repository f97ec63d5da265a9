#include "cnnengine/models/checkpoint.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "cnnengine/base/detail/regular_file.hpp"

namespace cnn {
namespace {

constexpr char kMagic[8] = {'C', 'N', 'N', 'W', 'E', 'I', 'G', 'H'};
constexpr std::uint32_t kVersion = 1;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t fingerprint;  // CRC-32 of the network summary: layers and shapes
  std::uint64_t floats;
};

std::uint32_t crc(const void* data, std::size_t bytes, std::uint32_t seed = 0) {
  uLong value = seed;
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    value = crc32(value, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return static_cast<std::uint32_t>(value);
}

// The parameters' names and shapes in order: what the weights must match. Layers without
// parameters (and their order, which the engine may rewrite) do not change it.
std::uint32_t fingerprint(const Network& network) {
  std::string text;
  for (int id = 1; id < network.size(); ++id)
    for (const auto& p : network.node(id).layer->parameters())
      text += network.node(id).layer->type_name() + "." + p.name + p.shape.str() + ";";
  return crc(text.data(), text.size());
}

// Unique per process: two runs saving to one path each write their own.
std::filesystem::path temporary_path(const std::filesystem::path& path) {
  std::filesystem::path temporary = path;
  temporary += ".partial." + std::to_string(::getpid());
  return temporary;
}

void remove_quietly(const std::filesystem::path& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace

void check_save_path(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const std::string where = "cannot save weights to " + path.string() + ": ";
  if (path.empty() || !path.has_filename()) throw CheckpointError(where + "give a file name");
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw CheckpointError(where + "the folder " + folder.string() + " does not exist");
  if (fs::exists(path, ec))  // a new file is fine; an existing one must be a regular file
    if (const std::string problem = regular_file_problem(path); !problem.empty())
      throw CheckpointError(where + "it " + problem);
  const fs::path probe = temporary_path(path);
  if (!std::ofstream(probe, std::ios::binary | std::ios::trunc))
    throw CheckpointError(where + "cannot create a file in " + folder.string() + ": " + std::strerror(errno));
  remove_quietly(probe);
}

void save_weights(const std::filesystem::path& path, const Network& network, const ParameterStore& params) {
  const std::vector<float> values = params.download();
  if (!all_finite(values))
    throw CheckpointError("training diverged: the weights hold NaN or infinite values; " + path.string() +
                          " is unchanged");
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.fingerprint = fingerprint(network);
  header.floats = values.size();
  const std::uint32_t checksum = crc(values.data(), values.size() * sizeof(float));

  const std::filesystem::path temporary = temporary_path(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw CheckpointError("cannot write " + temporary.string() + ": " + std::strerror(errno) + "; " + path.string() +
                            " is unchanged");
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    out.write(reinterpret_cast<const char*>(&checksum), sizeof checksum);
    out.flush();
    if (!out) {
      remove_quietly(temporary);
      throw CheckpointError("writing " + temporary.string() + " failed (disk full?); " + path.string() + " is unchanged");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    remove_quietly(temporary);
    throw CheckpointError("cannot replace " + path.string() + " with the new weights: " + ec.message() + "; " +
                          path.string() + " is unchanged");
  }
}

void load_weights(const std::filesystem::path& path, const Network& network, ParameterStore& params) {
  if (const std::string problem = regular_file_problem(path); !problem.empty())
    throw CheckpointError("cannot load weights from " + path.string() + ": it " + problem);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot open " + path.string() + ": " + std::strerror(errno));
  Header header{};
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header) || std::memcmp(header.magic, kMagic, sizeof kMagic))
    throw CheckpointError(path.string() + ": not a cnnengine weights file");
  if (header.version != kVersion)
    throw CheckpointError(path.string() + ": version " + std::to_string(header.version) + ", expected " + std::to_string(kVersion));
  if (header.fingerprint != fingerprint(network) || header.floats != params.total_floats())
    throw CheckpointError(path.string() + ": weights of another network (" + std::to_string(header.floats) +
                          " values, this network has " + std::to_string(params.total_floats()) + ")");
  std::vector<float> values(header.floats);
  std::uint32_t checksum = 0;
  if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float))) ||
      !in.read(reinterpret_cast<char*>(&checksum), sizeof checksum))
    throw CheckpointError(path.string() + ": truncated");
  if (checksum != crc(values.data(), values.size() * sizeof(float)))
    throw CheckpointError(path.string() + ": corrupt (checksum mismatch)");
  if (!all_finite(values))
    throw CheckpointError(path.string() + ": holds NaN or infinite weights (saved from a run that diverged)");
  params.upload(values);
}

}  // namespace cnn
