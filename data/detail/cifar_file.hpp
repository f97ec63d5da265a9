#pragma once
// One file of the CIFAR binary version: a series of records, each the label bytes then 3072
// pixel bytes (32x32 red, then green, then blue, each row by row: CHW). CIFAR-10 has one label
// byte (0..9); CIFAR-100 two (coarse 0..19, then fine 0..99). The file is read raw: its first
// bytes may well be 1f 8b, a label and a pixel, not gzip.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

inline constexpr int kCifarSide = 32;
inline constexpr std::size_t kCifarPixelBytes = 3 * kCifarSide * kCifarSide;

// The most one CIFAR file may hold: 4 GiB, as for an IDX file (CIFAR-100's train.bin takes 154 MB).
inline constexpr std::uint64_t kMaxCifarFileBytes = std::uint64_t{4} << 30;

// What a record's label bytes are: how many values each may take ({10}; {20, 100}), and which
// of them is the class.
struct CifarRecordLayout {
  std::vector<int> label_classes;
  std::vector<std::string> label_names;  // for messages: {"label"}; {"coarse label", "fine label"}
  std::size_t class_label = 0;
  std::size_t record_bytes() const { return label_classes.size() + kCifarPixelBytes; }
};

// The number of records in the file, from its size alone, nothing read: a regular file, at
// most kMaxCifarFileBytes, at least one record, a whole number of records (otherwise the record
// cut short is named). Throws DataError naming the file.
std::size_t cifar_record_count(const std::filesystem::path& path, const CifarRecordLayout& layout);

// Reads the `records` records cifar_record_count found, appending each class label to `labels`
// and its pixels to `pixels` (the caller reserves the room: nothing here grows them beyond it).
// Every label byte must be in range. Throws DataError naming the file and the record.
void read_cifar_records(const std::filesystem::path& path, const CifarRecordLayout& layout, std::size_t records,
                        std::vector<std::uint8_t>& labels, std::vector<std::uint8_t>& pixels);

}  // namespace cnn::data
