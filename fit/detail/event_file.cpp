#include "fit/detail/event_file.hpp"

#include <cstdint>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include <cnnengine/base/error.hpp>

namespace cnn::detail {
namespace {

// The reflected Castagnoli polynomial's table, made once.
const std::array<std::uint32_t, 256>& crc32c_table() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// TFRecord's mask: a CRC of data that holds CRCs is no CRC of its own.
std::uint32_t masked_crc(const void* data, std::size_t size) {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

// ---- Protocol buffers: the wire format of the few fields an event of scalars has.
void varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}
void key(std::string& out, int field, int wire_type) { varint(out, static_cast<std::uint64_t>(field) << 3 | wire_type); }
template <typename T>
void fixed(std::string& out, int field, T value) {  // double: wire type 1, float: 5
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian, as the wire format (x86, ARM)
  out.append(bytes, sizeof(T));
}
void bytes_field(std::string& out, int field, std::string_view value) {
  key(out, field, 2);
  varint(out, value.size());
  out.append(value);
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5, session_log = 7.
std::string event_head(long step) {
  std::string event;
  fixed(event, 1, wall_time());
  key(event, 2, 0);
  varint(event, static_cast<std::uint64_t>(step));
  return event;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  const auto& table = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

EventFile::EventFile(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  // TensorBoard reads a folder's files in the order of their names: a resumed run's must come after
  // the files already there (the same second and a smaller process number would not).
  std::string last;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find("tfevents") != std::string::npos && name > last) last = name;
  }
  auto name_at = [&](long long seconds) {
    return "events.out.tfevents." + std::to_string(seconds) + "." + host + "." + std::to_string(getpid());
  };
  auto seconds = static_cast<long long>(wall_time());
  while (name_at(seconds) <= last) ++seconds;
  path_ = folder / name_at(seconds);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw ConfigError("cannot write the TensorBoard event file " + path_.string());
  std::string event = event_head(0);
  bytes_field(event, 3, "brain.Event:2");
  write_event(event);
}

void EventFile::start_session(long step) {
  std::string session_log;  // SessionLog: status = 1 (enum), START = 1
  key(session_log, 1, 0);
  varint(session_log, 1);
  std::string event = event_head(step);
  bytes_field(event, 7, session_log);
  write_event(event);
}

void EventFile::scalars(long step, const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;  // Summary: value = 1, each a Value: tag = 1, simple_value = 2 (float)
  for (const auto& [tag, number] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    fixed(value, 2, number);
    bytes_field(summary, 1, value);
  }
  std::string event = event_head(step);
  bytes_field(event, 5, summary);
  write_event(event);
}

void EventFile::write_event(const std::string& event) {
  const std::uint64_t length = event.size();
  char header[12];
  std::memcpy(header, &length, 8);
  const std::uint32_t length_crc = masked_crc(header, 8), data_crc = masked_crc(event.data(), event.size());
  std::memcpy(header + 8, &length_crc, 4);
  out_.write(header, sizeof header);
  out_.write(event.data(), static_cast<std::streamsize>(event.size()));
  out_.write(reinterpret_cast<const char*>(&data_crc), 4);
  out_.flush();
  if (!out_) throw Error("writing the TensorBoard event file " + path_.string() + " failed (disk full?)");
}

}  // namespace cnn::detail
