#include "data/detail/cifar_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>

#include "data/data_error.hpp"
#include "data/detail/open_file.hpp"

namespace cnn::data {
namespace {

std::string bytes_text(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

// "of 3074 bytes (a coarse label byte, a fine label byte and 3072 pixel bytes)"
std::string record_size_text(const CifarRecordLayout& layout) {
  std::string parts;
  for (const std::string& name : layout.label_names) parts += (parts.empty() ? "a " : ", a ") + name + " byte";
  return "of " + std::to_string(layout.record_bytes()) + " bytes (" + parts + " and " +
         std::to_string(kCifarPixelBytes) + " pixel bytes)";
}

void check_labels(const std::filesystem::path& path, const CifarRecordLayout& layout, const std::uint8_t* record,
                  std::size_t index) {
  for (std::size_t j = 0; j < layout.label_classes.size(); ++j) {
    if (record[j] >= layout.label_classes[j]) {
      fail(path, layout.label_names[j] + " out of range at record " + std::to_string(index) + " (byte " +
                     std::to_string(index * layout.record_bytes() + j) + "): expected < " +
                     std::to_string(layout.label_classes[j]) + ", found " + std::to_string(record[j]));
    }
  }
}

}  // namespace

std::size_t cifar_record_count(const std::filesystem::path& path, const CifarRecordLayout& layout) {
  require_regular_file(path);
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  const std::uint64_t record = layout.record_bytes();
  if (size > kMaxCifarFileBytes)
    fail(path, "holds " + bytes_text(size) + ", over the limit of 4 GiB for one CIFAR file");
  if (size == 0) fail(path, "holds no records: expected records " + record_size_text(layout));
  const std::uint64_t whole = size / record, left = size % record;
  if (left != 0) {
    fail(path, "truncated: record " + std::to_string(whole) + " has " + std::to_string(left) + " of its " +
                   bytes_text(record) + "; the file holds " + bytes_text(size) + ", " + std::to_string(whole) +
                   " whole record" + (whole == 1 ? " " : "s ") + record_size_text(layout) +
                   " and part of one");
  }
  return static_cast<std::size_t>(whole);
}

void read_cifar_records(const std::filesystem::path& path, const CifarRecordLayout& layout, std::size_t records,
                        std::vector<std::uint8_t>& labels, std::vector<std::uint8_t>& pixels) {
  constexpr std::size_t kChunkRecords = 256;
  const std::size_t record = layout.record_bytes();
  File file = open_for_reading(path);
  std::vector<std::uint8_t> chunk(std::min(records, kChunkRecords) * record);
  for (std::size_t first = 0; first < records; first += kChunkRecords) {
    const std::size_t count = std::min(kChunkRecords, records - first);
    const std::size_t got = std::fread(chunk.data(), 1, count * record, file.get());
    if (got < count * record) {
      if (std::ferror(file.get())) fail(path, std::string("read error: ") + std::strerror(errno));
      fail(path, "truncated while being read: expected " + std::to_string(records) + " records, the file ends in record " +
                     std::to_string(first + got / record));
    }
    for (std::size_t r = 0; r < count; ++r) {
      const std::uint8_t* at = chunk.data() + r * record;
      check_labels(path, layout, at, first + r);
      labels.push_back(at[layout.class_label]);
      pixels.insert(pixels.end(), at + layout.label_classes.size(), at + record);
    }
  }
  if (std::fgetc(file.get()) != EOF)
    fail(path, "grew while being read: expected " + std::to_string(records) + " records of " + bytes_text(record));
}

}  // namespace cnn::data
