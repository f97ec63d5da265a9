#pragma once
// CIFAR binary files for the tests, written from known records: the data tests, the training
// test and tests/tools/make_cifar_folder (train_images' ctest) use them. Needs the standard
// library alone, so the generator program builds it on its own.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data::test {

inline constexpr std::size_t kCifarImageBytes = 3 * 32 * 32;

// Records of `index_first` .. + n - 1, record g having label g % 10 and pixel byte p (CHW)
// (g + p) % 256: every image and every position its own value.
std::vector<std::uint8_t> cifar10_records(int n, int index_first = 0);
// The same with two label bytes: coarse (g % 100) / 5, then fine g % 100.
std::vector<std::uint8_t> cifar100_records(int n, int index_first = 0);
// What load() of record g should give at pixel p.
float cifar_pixel(int g, std::size_t p);

// Records a network can learn: label g % 10; class c lights the c-th tenth of the image (in
// CHW order: red rows for classes 0..3, green 3..6, blue 6..9) over seeded noise.
std::vector<std::uint8_t> cifar10_learnable_records(int n, int index_first, std::uint64_t seed);

// "airplane\nautomobile\n...truck\n\n", as the real batches.meta.txt (it ends in a blank line).
std::string cifar10_names_text();
std::vector<std::string> cifar10_names();

// A cifar-10-batches-bin folder: data_batch_1..5.bin of `per_batch` records each (records 0..,
// in order across the batches), test_batch.bin of `test_records` (records 1000..), and
// batches.meta.txt. learnable: cifar10_learnable_records instead of cifar10_records.
void write_cifar10_folder(const std::filesystem::path& folder, int per_batch, int test_records, bool learnable = false);
// A cifar-100-binary folder: train.bin (records 0..), test.bin (records 1000..) and the names
// files "fine0".."fine99", "coarse0".."coarse19".
void write_cifar100_folder(const std::filesystem::path& folder, int train_records, int test_records);

void write_file(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);
void write_text(const std::filesystem::path& path, const std::string& text);

}  // namespace cnn::data::test
