#include <cnnengine/models/checkpoint.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <vector>

#include "base/atomic_file.hpp"
#include "base/detail/finite.hpp"
#include "base/regular_file.hpp"
#include "models/detail/checkpoint_meta.hpp"
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_import.hpp>

// Note [Checkpoint layout]: version 2 is a header (magic, version, flags, the description's
// length), the description (JSON: checkpoint_meta.cpp), the float blocks in this order
// (parameters with BatchNorm statistics, the optimizer's state, three floats per recorded step:
// loss, accuracy, learning rate) and a CRC-32 of every byte before it. The file's size is
// exactly that: a byte more or less is an error. Floats are little-endian IEEE 754, as on every
// host cnnengine builds for. Version 1 (weights only: magic, version, fingerprint, float count,
// the floats, their CRC-32) is still read by load_weights.

namespace cnn {
namespace {

constexpr char kMagic[8] = {'C', 'N', 'N', 'C', 'K', 'P', 'T', '\n'};
constexpr char kMagicV1[8] = {'C', 'N', 'N', 'W', 'E', 'I', 'G', 'H'};
constexpr std::uint64_t kMaxMetaBytes = std::uint64_t{64} << 20;
constexpr std::size_t kChunk = ParameterStore::kCopyChunkFloats;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t flags;
  std::uint64_t meta_bytes;
};
static_assert(sizeof(Header) == 24);

struct HeaderV1 {
  char magic[8];
  std::uint32_t version;
  std::uint32_t fingerprint;
  std::uint64_t floats;
};
static_assert(sizeof(HeaderV1) == 24);

std::uint32_t crc(std::uint32_t running, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong value = running;
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
  return crc(0, text.data(), text.size());
}

std::string file_problem(const std::filesystem::path& path) {
  const std::string problem = regular_file_problem(path);
  return problem.empty() ? problem : path.string() + ": it " + problem;
}

// Writes through an AtomicFile, keeping the CRC of every byte.
class ChecksummedWriter {
 public:
  explicit ChecksummedWriter(AtomicFile& file) : file_(file) {}
  void write(const void* data, std::size_t bytes) {
    sum_ = crc(sum_, data, bytes);
    file_.write(data, bytes);
  }
  void finish() { file_.write(&sum_, sizeof sum_); }

 private:
  AtomicFile& file_;
  std::uint32_t sum_ = 0;
};

// A block of the store, a chunk at a time; parameters are refused when not finite.
void write_block(ChecksummedWriter& out, const ParameterStore& params, ParameterStore::Block block,
                 const std::filesystem::path& path) {
  const std::size_t total = params.floats(block);
  std::vector<float> chunk(std::min(kChunk, std::max<std::size_t>(total, 1)));
  for (std::size_t first = 0; first < total; first += chunk.size()) {
    const std::size_t count = std::min(chunk.size(), total - first);
    params.download(block, first, count, chunk.data());
    if (first_non_finite(chunk.data(), count) < count)
      throw CheckpointError("training diverged: the weights hold NaN or infinite values; " + path.string() +
                            " is unchanged");
    out.write(chunk.data(), count * sizeof(float));
  }
}

// Reads one file from an open descriptor, keeping the CRC of what it read. Every shortfall is a
// CheckpointError naming the file.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : path_(path) {
    if (const std::string problem = file_problem(path); !problem.empty())
      throw CheckpointError("cannot read the checkpoint " + problem);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw CheckpointError("cannot open " + path.string() + ": " + std::strerror(errno));
    struct stat status {};
    if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) {
      ::close(fd_);
      throw CheckpointError("cannot read " + path.string() + ": not a regular file");
    }
    size_ = static_cast<std::uint64_t>(status.st_size);
  }
  ~Reader() { ::close(fd_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  std::uint64_t size() const { return size_; }
  std::uint64_t position() const { return position_; }
  const std::filesystem::path& path() const { return path_; }
  std::uint32_t checksum() const { return sum_; }

  void read(void* data, std::size_t bytes, bool checksummed = true) {
    char* p = static_cast<char*>(data);
    std::size_t left = bytes;
    while (left > 0) {
      const ssize_t got = ::read(fd_, p, left);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw CheckpointError("reading " + path_.string() + " failed: " + std::strerror(errno));
      if (got == 0) throw CheckpointError(path_.string() + ": truncated (it ends at byte " + std::to_string(size_) + ")");
      p += got;
      left -= static_cast<std::size_t>(got);
    }
    if (checksummed) sum_ = crc(sum_, data, bytes);
    position_ += bytes;
  }

  void restart_checksum() { sum_ = 0; }
  // Back to `offset`, the checksum no longer kept.
  void seek(std::uint64_t offset) {
    if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0)
      throw CheckpointError("reading " + path_.string() + " failed: " + std::strerror(errno));
    position_ = offset;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0, position_ = 0;
  std::uint32_t sum_ = 0;
};

// A file checked whole: its description, and where its blocks begin.
struct Verified {
  int version = 0;
  CheckpointMeta meta;
  std::uint64_t parameters_offset = 0;  // floats of the parameters block begin here
};

void check_size(Reader& in, std::uint64_t expected) {
  if (in.size() < expected) throw CheckpointError(in.path().string() + ": truncated (" + std::to_string(in.size()) +
                                                  " bytes, its description says " + std::to_string(expected) + ")");
  if (in.size() > expected)
    throw CheckpointError(in.path().string() + ": " + std::to_string(in.size() - expected) +
                          " bytes after its checksum: the file was appended to or is not what it seems");
}

void check_checksum(Reader& in) {
  const std::uint32_t computed = in.checksum();
  std::uint32_t stored = 0;
  in.read(&stored, sizeof stored, false);
  if (stored != computed) throw CheckpointError(in.path().string() + ": corrupt (checksum mismatch)");
}

// Reads `floats` floats, chunk by chunk; parameters must be finite.
void read_floats(Reader& in, std::uint64_t floats, bool must_be_finite) {
  std::vector<float> chunk(static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, std::max<std::uint64_t>(floats, 1))));
  for (std::uint64_t done = 0; done < floats;) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), floats - done));
    in.read(chunk.data(), count * sizeof(float));
    if (must_be_finite && first_non_finite(chunk.data(), count) < count)
      throw CheckpointError(in.path().string() + ": holds NaN or infinite weights (saved from a run that diverged)");
    done += count;
  }
}

// Version 1: its checksum covers the floats alone.
Verified verify_v1(Reader& in) {
  HeaderV1 header{};
  in.read(&header.version, sizeof header - sizeof header.magic);
  if (header.version != 1)
    throw CheckpointError(in.path().string() + ": weights file version " + std::to_string(header.version) +
                          ", not one this cnnengine reads");
  if (header.floats > in.size() / sizeof(float)) check_size(in, in.size() + 1);  // cannot be in this file
  check_size(in, sizeof(HeaderV1) + header.floats * sizeof(float) + sizeof(std::uint32_t));
  in.restart_checksum();
  read_floats(in, header.floats, true);
  check_checksum(in);
  Verified v;
  v.version = 1;
  v.meta.fingerprint = header.fingerprint;
  v.meta.parameter_floats = header.floats;
  v.parameters_offset = sizeof(HeaderV1);
  return v;
}

Verified verify(Reader& in) {
  char magic[8] = {};
  if (in.size() < sizeof(Header)) throw CheckpointError(in.path().string() + ": not a cnnengine weights file or checkpoint (too short)");
  in.read(magic, sizeof magic);
  if (std::memcmp(magic, kMagicV1, sizeof magic) == 0) return verify_v1(in);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0)
    throw CheckpointError(in.path().string() + ": not a cnnengine weights file or checkpoint");
  Header header{};
  in.read(&header.version, sizeof header - sizeof magic);
  if (header.version > static_cast<std::uint32_t>(kCheckpointVersion))
    throw CheckpointError(in.path().string() + ": checkpoint version " + std::to_string(header.version) +
                          " is newer than this cnnengine reads (" + std::to_string(kCheckpointVersion) +
                          "): update cnnengine");
  if (header.version != static_cast<std::uint32_t>(kCheckpointVersion) || header.flags != 0)
    throw CheckpointError(in.path().string() + ": corrupt (version " + std::to_string(header.version) + ", flags " +
                          std::to_string(header.flags) + ")");
  if (header.meta_bytes > kMaxMetaBytes || header.meta_bytes > in.size() - sizeof(Header))
    throw CheckpointError(in.path().string() + ": corrupt or truncated (a description of " +
                          std::to_string(header.meta_bytes) + " bytes in a file of " + std::to_string(in.size()) + ")");
  std::string text(static_cast<std::size_t>(header.meta_bytes), '\0');
  in.read(text.data(), text.size());
  Verified v;
  v.version = kCheckpointVersion;
  v.meta = read_meta(text, in.path().string());
  v.parameters_offset = in.position();
  const CheckpointMeta& m = v.meta;
  const std::uint64_t limit = in.size() / sizeof(float);
  if (m.parameter_floats > limit || m.optimizer_floats > limit || m.history_steps > limit)
    check_size(in, in.size() + 1);  // the blocks it describes cannot be in this file
  check_size(in, v.parameters_offset + (m.parameter_floats + m.optimizer_floats + 3 * m.history_steps) * sizeof(float) +
                     sizeof(std::uint32_t));
  read_floats(in, m.parameter_floats, true);
  read_floats(in, m.optimizer_floats, false);
  read_floats(in, 3 * m.history_steps, false);
  check_checksum(in);
  return v;
}

void check_network(const Verified& v, const Network& network, const ParameterStore& params,
                   const std::filesystem::path& path) {
  if (v.meta.fingerprint != fingerprint(network) || v.meta.parameter_floats != params.total_floats())
    throw CheckpointError(path.string() + ": weights of another network (" + std::to_string(v.meta.parameter_floats) +
                          " values, this network has " + std::to_string(params.total_floats()) +
                          "; load_matching_weights takes the layers that match)");
}

// Streams `floats` floats from `in` into a block of the store.
void upload_block(Reader& in, ParameterStore& params, ParameterStore::Block block, std::uint64_t floats) {
  std::vector<float> chunk(static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, std::max<std::uint64_t>(floats, 1))));
  for (std::uint64_t first = 0; first < floats;) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), floats - first));
    in.read(chunk.data(), count * sizeof(float), false);
    params.upload(block, static_cast<std::size_t>(first), count, chunk.data());
    first += count;
  }
}

// An ONNX model where a checkpoint is read (models/onnx_import.hpp): a model that cannot be
// imported is a checkpoint that does not read.
ImportedModel import_model(const std::filesystem::path& path) {
  try {
    return import_onnx(path);
  } catch (const ConfigError& e) {
    throw CheckpointError(e.what());
  }
}

// The layers of `network` that match those of `other` (at the same place, of the same kind, with
// parameters of the same names and shapes), up to node `through` (-1: every node), take its values,
// which `read(offset, count, to)` reads from the file's parameter block.
template <class Read>
WeightTransfer transfer_matching(const Network& other, const Network& network, ParameterStore& params, int through,
                                 Read read) {
  const std::vector<ParameterStore::Place> theirs = ParameterStore::places(other), ours = ParameterStore::places(network);
  auto of_node = [](const std::vector<ParameterStore::Place>& places, int node) {
    std::vector<const ParameterStore::Place*> found;
    for (const ParameterStore::Place& p : places)
      if (p.node == node) found.push_back(&p);
    return found;
  };
  WeightTransfer transfer;
  std::vector<float> values;
  for (int id = 1; id < network.size(); ++id) {
    const std::vector<const ParameterStore::Place*> mine = of_node(ours, id);
    if (mine.empty()) continue;
    const std::string name = std::to_string(id) + " " + network.node(id).layer->describe();
    const std::vector<const ParameterStore::Place*> file = id < other.size() ? of_node(theirs, id)
                                                                             : std::vector<const ParameterStore::Place*>{};
    bool match = (through < 0 || id <= through) && file.size() == mine.size() &&
                 other.node(id).layer->type_name() == network.node(id).layer->type_name();
    for (std::size_t k = 0; match && k < mine.size(); ++k)
      match = file[k]->name == mine[k]->name && file[k]->shape == mine[k]->shape;
    if (!match) {
      transfer.kept.push_back(name);
      continue;
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      values.resize(mine[k]->shape.elements());
      read(file[k]->offset, values.size(), values.data());
      params.upload(ParameterStore::Block::parameters, mine[k]->offset, values.size(), values.data());
    }
    transfer.loaded.push_back(name);
  }
  return transfer;
}

}  // namespace

void require_network(const CheckpointInfo& info, const std::filesystem::path& path) {
  if (info.model.network.empty())
    throw CheckpointError(path.string() + ": weights only (a file of version " + std::to_string(info.version) +
                          "), with no network: load them into a network built as it was trained");
}

Network checkpoint_network(const CheckpointInfo& info, const std::filesystem::path& path, int classes) {
  require_network(info, path);
  // A segmentation's output is a class score a pixel: its classes are its channels.
  const bool per_pixel = info.model.loss.task == Task::segment;
  Network network = parse_network(info.model.network, info.model.input, per_pixel ? 0 : classes, path.string());
  network.set_loss(info.model.loss);
  try {
    network.check_loss();
  } catch (const Error& e) {
    throw CheckpointError(path.string() + ": its network does not suit the task it was saved with: " + e.what());
  }
  if (per_pixel && classes > 0 && network.num_classes() != classes)
    throw ShapeError(path.string() + ": its network segments " + std::to_string(network.num_classes()) +
                     " classes, not " + std::to_string(classes));
  const std::size_t network_floats = ParameterStore::planned_parameter_floats(network);
  if (network_floats != info.parameter_floats)
    throw CheckpointError(path.string() + ": its network has " + std::to_string(network_floats) +
                          " parameters but the file holds " + std::to_string(info.parameter_floats) +
                          " values: the file is corrupt or was altered");
  return network;
}

ModelDescription describe_model(const Network& network) {
  ModelDescription m;
  m.network = network_text(network);
  m.input = network.input_shape();
  m.preprocessing.shape = data::SampleShape{m.input[0], m.input[1], m.input[2]};
  m.loss = network.loss();
  return m;
}

bool is_checkpoint(const std::filesystem::path& path) {
  if (!regular_file_problem(path).empty()) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[8] = {};
  const bool read = ::read(fd, magic, sizeof magic) == static_cast<ssize_t>(sizeof magic);
  ::close(fd);
  return read && (std::memcmp(magic, kMagic, sizeof magic) == 0 || std::memcmp(magic, kMagicV1, sizeof magic) == 0);
}

void check_save_path(const std::filesystem::path& path, bool overwrite) {
  namespace fs = std::filesystem;
  const std::string where = "cannot save weights to " + path.string() + ": ";
  if (path.empty() || !path.has_filename()) throw CheckpointError(where + "give a file name");
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw CheckpointError(where + "the folder " + folder.string() + " does not exist");
  if (fs::exists(path, ec)) {  // a new file is fine; an existing one must be a regular file
    if (const std::string problem = regular_file_problem(path); !problem.empty())
      throw CheckpointError(where + "it " + problem);
    if (!overwrite && !is_checkpoint(path))
      throw CheckpointError(where +
                            "it exists and is not a cnnengine checkpoint (save elsewhere, or allow overwriting it)");
  }
  try {
    AtomicFile probe(path);  // its folder exists and takes a new file
  } catch (const Error& e) {
    throw CheckpointError(where + e.what());
  }
}

void save_checkpoint(const std::filesystem::path& path, const Network& network, const ParameterStore& params,
                     const ModelDescription& model, const TrainingCheckpoint* training) {
  CheckpointMeta meta;
  meta.model = model;
  meta.fingerprint = fingerprint(network);
  meta.parameter_floats = params.floats(ParameterStore::Block::parameters);
  if (training) {
    meta.optimizer_floats = params.floats(ParameterStore::Block::optimizer_state);
    meta.history_steps = training->progress.steps.size();
    meta.training = *training;
    meta.training->progress.steps.clear();
  }
  const std::string text = write_meta(meta);
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kCheckpointVersion;
  header.meta_bytes = text.size();
  try {
    AtomicFile file(path);
    ChecksummedWriter out(file);
    out.write(&header, sizeof header);
    out.write(text.data(), text.size());
    write_block(out, params, ParameterStore::Block::parameters, path);
    if (training) {
      write_block(out, params, ParameterStore::Block::optimizer_state, path);
      for (const StepRecord& s : training->progress.steps) {
        const float record[3] = {s.loss, s.accuracy, s.learning_rate};
        out.write(record, sizeof record);
      }
    }
    out.finish();
    file.commit();
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointError(std::string(e.what()) + "; " + path.string() + " is unchanged");
  }
}

CheckpointInfo read_checkpoint(const std::filesystem::path& path) {
  if (is_onnx_file(path)) {
    ImportedModel imported = import_model(path);
    CheckpointInfo info;
    info.version = kCheckpointVersion;
    info.model = std::move(imported.description);
    info.parameter_floats = imported.parameters.size();
    return info;
  }
  Reader in(path);
  Verified v = verify(in);
  CheckpointInfo info;
  info.version = v.version;
  info.model = std::move(v.meta.model);
  info.parameter_floats = v.meta.parameter_floats;
  info.optimizer_floats = v.meta.optimizer_floats;
  if (v.meta.training) {
    info.training = std::move(v.meta.training);
    in.seek(v.parameters_offset + (v.meta.parameter_floats + v.meta.optimizer_floats) * sizeof(float));
    std::vector<float> history(static_cast<std::size_t>(3 * v.meta.history_steps));
    in.read(history.data(), history.size() * sizeof(float), false);
    for (std::size_t s = 0; s < v.meta.history_steps; ++s)
      info.training->progress.steps.push_back({history[3 * s], history[3 * s + 1], history[3 * s + 2]});
  }
  return info;
}

void load_parameters(const std::filesystem::path& path, const Network& network, ParameterStore& params,
                     bool optimizer_state) {
  if (is_onnx_file(path)) {
    if (optimizer_state) throw CheckpointError(path.string() + ": an ONNX model holds no optimizer state to resume from");
    const ImportedModel imported = import_model(path);
    if (fingerprint(imported.network) != fingerprint(network) || imported.parameters.size() != params.total_floats())
      throw CheckpointError(path.string() + ": the weights of another network (load_matching_weights takes the layers "
                            "that match)");
    params.upload(ParameterStore::Block::parameters, 0, imported.parameters.size(), imported.parameters.data());
    return;
  }
  Reader in(path);
  const Verified v = verify(in);
  check_network(v, network, params, path);
  if (optimizer_state && v.meta.optimizer_floats != params.floats(ParameterStore::Block::optimizer_state))
    throw CheckpointError(path.string() + ": holds " + std::to_string(v.meta.optimizer_floats) +
                          " values of optimizer state, this optimizer has " +
                          std::to_string(params.floats(ParameterStore::Block::optimizer_state)) +
                          (v.meta.optimizer_floats ? " (another optimizer?)" : " (a file of weights only)"));
  in.seek(v.parameters_offset);
  upload_block(in, params, ParameterStore::Block::parameters, v.meta.parameter_floats);
  if (optimizer_state) upload_block(in, params, ParameterStore::Block::optimizer_state, v.meta.optimizer_floats);
}

void save_weights(const std::filesystem::path& path, const Network& network, const ParameterStore& params) {
  save_checkpoint(path, network, params, describe_model(network));
}

void load_weights(const std::filesystem::path& path, const Network& network, ParameterStore& params) {
  load_parameters(path, network, params, false);
}

WeightTransfer load_matching_weights(const std::filesystem::path& path, const Network& network,
                                     ParameterStore& params, int through) {
  if (is_onnx_file(path)) {
    const ImportedModel imported = import_model(path);
    return transfer_matching(imported.network, network, params, through,
                             [&](std::size_t offset, std::size_t count, float* to) {
                               std::copy_n(imported.parameters.begin() + static_cast<std::ptrdiff_t>(offset), count, to);
                             });
  }
  const CheckpointInfo info = read_checkpoint(path);
  const Network other = checkpoint_network(info, path);
  Reader in(path);
  const Verified v = verify(in);
  return transfer_matching(other, network, params, through, [&](std::size_t offset, std::size_t count, float* to) {
    in.seek(v.parameters_offset + offset * sizeof(float));
    in.read(to, count * sizeof(float), false);
  });
}

}  // namespace cnn
