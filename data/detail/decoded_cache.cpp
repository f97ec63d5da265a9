#include "data/detail/decoded_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "data/data_error.hpp"
#include "data/detail/random.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

// A cache file: a header, a table of an entry an image, then the images, page-aligned.
constexpr char kMagic[8] = {'C', 'N', 'N', 'D', 'C', 'A', 'C', 'H'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 64, kEntryBytes = 24, kPage = 4096;

struct FileEntry {  // as the table stores it
  std::uint64_t offset;
  std::uint32_t height, width, crc, filled;
};

template <typename T>
T read_at(const unsigned char* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}
template <typename T>
void write_at(unsigned char* at, T v) {
  std::memcpy(at, &v, sizeof v);
}

FileEntry file_entry(const unsigned char* table, std::size_t i) {
  const unsigned char* e = table + i * kEntryBytes;
  return {read_at<std::uint64_t>(e), read_at<std::uint32_t>(e + 8), read_at<std::uint32_t>(e + 12),
          read_at<std::uint32_t>(e + 16), read_at<std::uint32_t>(e + 20)};
}

void write_file_entry(unsigned char* table, std::size_t i, const FileEntry& f) {
  unsigned char* e = table + i * kEntryBytes;
  write_at(e, f.offset);
  write_at(e + 8, f.height);
  write_at(e + 12, f.width);
  write_at(e + 16, f.crc);
  write_at(e + 20, f.filled);
}

std::uint32_t crc_of(const unsigned char* bytes, std::size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t done = 0; done < n;) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(n - done, std::size_t{1} << 30));
    crc = crc32(crc, bytes + done, chunk);
    done += chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string hex(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

std::uint64_t hash_text(const std::string& text, std::uint64_t h) {
  for (unsigned char c : text) h = mix64(h ^ c);
  return h;
}

[[noreturn]] void fail_errno(const fs::path& path, const std::string& what) {
  fail(path, what + ": " + std::strerror(errno));
}

}  // namespace

std::pair<int, int> kept_size(int height, int width, int side) {
  const int shorter = std::min(height, width), longer = std::max(height, width);
  if (side <= 0 || shorter <= side) return {height, width};
  const auto scaled = static_cast<int>(std::int64_t{side} * longer / shorter);
  return height <= width ? std::pair{side, scaled} : std::pair{scaled, side};
}

std::uint64_t files_identity(const std::vector<fs::path>& files) {
  std::uint64_t h = hash_values(files.size(), kVersion);
  for (const fs::path& file : files) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(file, ec);
    if (ec) fail(file, "cannot read its size: " + ec.message());
    const auto time = fs::last_write_time(file, ec);
    if (ec) fail(file, "cannot read its modification time: " + ec.message());
    h = hash_text(file.string(), h);
    h = hash_values(h, size, static_cast<std::uint64_t>(time.time_since_epoch().count()));
  }
  return h;
}

DecodedCache::DecodedCache(const DecodedCacheOptions& options, int channels, int side,
                           const std::vector<std::pair<int, int>>& sizes, std::uint64_t identity,
                           const std::string& name)
    : entries_(sizes.size()), states_(new std::atomic<std::uint8_t>[sizes.size()]), channels_(channels), side_(side),
      name_(name) {
  // The layout: images in order while they fit in max_bytes, each page-aligned.
  std::uint64_t data = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Entry& e = entries_[i];
    std::tie(e.height, e.width) = kept_size(sizes[i].first, sizes[i].second, side);
    const std::uint64_t bytes = std::uint64_t(e.height) * std::uint64_t(e.width) * std::uint64_t(channels);
    const std::uint64_t end = memory::align_up(data + bytes, kPage);
    e.offset = data;
    e.held = end <= options.max_bytes;
    if (e.held) data = end;
    states_[i].store(empty, std::memory_order_relaxed);
  }
  if (options.folder.empty()) {
    bytes_ = std::max<std::size_t>(data, kPage);
    void* at = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) fail_errno(name, "cannot map " + std::to_string(bytes_) + " bytes for the decoded cache");
    base_ = static_cast<unsigned char*>(at);
    return;
  }
  data_offset_ = memory::align_up(kHeaderBytes + kEntryBytes * sizes.size(), kPage);
  bytes_ = data_offset_ + data;
  const std::uint64_t key = hash_values(hash_text(name, 0), static_cast<std::uint64_t>(side),
                                        static_cast<std::uint64_t>(channels));
  open_file(options.folder / ("cnnengine-cache-" + hex(key) + ".bin"), identity);
}

void DecodedCache::open_file(const fs::path& path, std::uint64_t identity) {
  file_ = path;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) fail_errno(path, "cannot open the decoded cache");
  try {
    struct stat st {};
    if (fstat(fd_, &st) != 0) fail_errno(path, "cannot read the decoded cache's size");
    if (!S_ISREG(st.st_mode)) fail(path, "the decoded cache is not a regular file");
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0)
      fail(path, "the decoded cache is in use by another run (give each run its own --cache folder)");
    // What the file holds now: ours, of this data and layout, or to be rebuilt; never another's.
    unsigned char header[kHeaderBytes] = {};
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > 0 && (size < kHeaderBytes || pread(fd_, header, kHeaderBytes, 0) != static_cast<ssize_t>(kHeaderBytes) ||
                     std::memcmp(header, kMagic, sizeof kMagic) != 0))
      fail(path, "not a decoded cache of cnnengine: not written over (remove it, or give another --cache folder)");
    const bool same = size == bytes_ && read_at<std::uint32_t>(header + 8) == kVersion &&
                      read_at<std::uint32_t>(header + 12) == static_cast<std::uint32_t>(channels_) &&
                      read_at<std::uint32_t>(header + 16) == static_cast<std::uint32_t>(side_) &&
                      read_at<std::uint32_t>(header + 20) == entries_.size() &&
                      read_at<std::uint64_t>(header + 24) == identity && read_at<std::uint64_t>(header + 32) == bytes_;
    if (!same) {
      // Rebuilt: emptied first, so that a stale image is never read as this data's, and its room
      // taken now, so that a full disk fails here and not inside a later write to the mapping.
      if (ftruncate(fd_, 0) != 0) fail_errno(path, "cannot empty the decoded cache to rebuild it");
      if (const int e = posix_fallocate(fd_, 0, static_cast<off_t>(bytes_)); e != 0) {
        errno = e;
        fail_errno(path, "no room for the decoded cache's " + std::to_string(bytes_) + " bytes");
      }
    }
    void* at = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (at == MAP_FAILED) fail_errno(path, "cannot map the decoded cache");
    base_ = static_cast<unsigned char*>(at);
    unsigned char* table = base_ + kHeaderBytes;
    bool layout = same;
    for (std::size_t i = 0; layout && i < entries_.size(); ++i) {
      const FileEntry f = file_entry(table, i);
      layout = f.offset == entries_[i].offset && f.height == static_cast<std::uint32_t>(entries_[i].height) &&
               f.width == static_cast<std::uint32_t>(entries_[i].width);
    }
    if (!layout) {
      std::memcpy(base_, kMagic, sizeof kMagic);
      write_at(base_ + 8, kVersion);
      write_at(base_ + 12, static_cast<std::uint32_t>(channels_));
      write_at(base_ + 16, static_cast<std::uint32_t>(side_));
      write_at(base_ + 20, static_cast<std::uint32_t>(entries_.size()));
      write_at(base_ + 24, identity);
      write_at(base_ + 32, static_cast<std::uint64_t>(bytes_));
      for (std::size_t i = 0; i < entries_.size(); ++i)
        write_file_entry(table, i,
                         {entries_[i].offset, static_cast<std::uint32_t>(entries_[i].height),
                          static_cast<std::uint32_t>(entries_[i].width), 0, 0});
    }
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].held && file_entry(table, i).filled == 1) states_[i].store(unchecked, std::memory_order_relaxed);
  } catch (...) {
    if (base_) munmap(base_, bytes_);
    base_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

DecodedCache::~DecodedCache() {
  if (base_) munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);  // the lock goes with it
}

std::size_t DecodedCache::image_bytes(std::size_t i) const {
  return static_cast<std::size_t>(entries_[i].height) * static_cast<std::size_t>(entries_[i].width) *
         static_cast<std::size_t>(channels_);
}

const std::uint8_t* DecodedCache::find(std::size_t i) const {
  std::atomic<std::uint8_t>& state = states_[i];
  std::uint8_t now = state.load(std::memory_order_acquire);
  unsigned char* pixels = base_ + data_offset_ + entries_[i].offset;
  if (now == ready) return pixels;
  if (now != unchecked || !state.compare_exchange_strong(now, filling, std::memory_order_acquire)) return nullptr;
  // Filled by an earlier run: trusted once its CRC matches.
  unsigned char* table = base_ + kHeaderBytes;
  FileEntry f = file_entry(table, i);
  if (crc_of(pixels, image_bytes(i)) == f.crc) {
    state.store(ready, std::memory_order_release);
    return pixels;
  }
  f.filled = 0;
  write_file_entry(table, i, f);
  state.store(empty, std::memory_order_release);
  return nullptr;
}

std::uint8_t* DecodedCache::claim(std::size_t i) {
  if (!entries_[i].held) return nullptr;
  std::uint8_t expected = empty;
  if (!states_[i].compare_exchange_strong(expected, filling, std::memory_order_acquire)) return nullptr;
  return base_ + data_offset_ + entries_[i].offset;
}

void DecodedCache::publish(std::size_t i) {
  if (!file_.empty()) {
    unsigned char* table = base_ + kHeaderBytes;
    FileEntry f = file_entry(table, i);
    f.crc = crc_of(base_ + data_offset_ + entries_[i].offset, image_bytes(i));
    f.filled = 1;
    write_file_entry(table, i, f);
  }
  states_[i].store(ready, std::memory_order_release);
}

void DecodedCache::abandon(std::size_t i) { states_[i].store(empty, std::memory_order_release); }

std::string DecodedCache::describe() const {
  std::size_t held = 0;
  for (const Entry& e : entries_) held += e.held;
  const std::string where = file_.empty() ? "in memory" : "in " + file_.string();
  return "decoded once, kept " + where + ": " + std::to_string(held) + " of " + std::to_string(entries_.size()) +
         " images at " + std::to_string(side_) + " on the shorter side, " + memory::format_bytes(bytes_);
}

}  // namespace cnn::data
