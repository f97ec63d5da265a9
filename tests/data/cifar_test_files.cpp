#include "cifar_test_files.hpp"

#include <cstdint>
#include <fstream>
#include <stdexcept>

namespace cnn::data::test {
namespace fs = std::filesystem;

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void append_pixels(std::vector<std::uint8_t>& out, int g) {
  for (std::size_t p = 0; p < kCifarImageBytes; ++p)
    out.push_back(static_cast<std::uint8_t>((static_cast<std::size_t>(g) + p) % 256));
}

}  // namespace

std::vector<std::uint8_t> cifar10_records(int n, int index_first) {
  std::vector<std::uint8_t> bytes;
  for (int g = index_first; g < index_first + n; ++g) {
    bytes.push_back(static_cast<std::uint8_t>(g % 10));
    append_pixels(bytes, g);
  }
  return bytes;
}

std::vector<std::uint8_t> cifar100_records(int n, int index_first) {
  std::vector<std::uint8_t> bytes;
  for (int g = index_first; g < index_first + n; ++g) {
    bytes.push_back(static_cast<std::uint8_t>(g % 100 / 5));
    bytes.push_back(static_cast<std::uint8_t>(g % 100));
    append_pixels(bytes, g);
  }
  return bytes;
}

float cifar_pixel(int g, std::size_t p) {
  return static_cast<float>((static_cast<std::size_t>(g) + p) % 256) * (1.0f / 255.0f);
}

std::vector<std::uint8_t> cifar10_learnable_records(int n, int index_first, std::uint64_t seed) {
  std::vector<std::uint8_t> bytes;
  for (int g = index_first; g < index_first + n; ++g) {
    const std::size_t label = static_cast<std::size_t>(g % 10);
    bytes.push_back(static_cast<std::uint8_t>(label));
    for (std::size_t p = 0; p < kCifarImageBytes; ++p) {
      const std::uint64_t key = (seed << 40) + static_cast<std::uint64_t>(g) * kCifarImageBytes + p;
      const auto noise = static_cast<std::uint8_t>(splitmix64(key) % 128);
      const bool lit = p * 10 / kCifarImageBytes == label;
      bytes.push_back(static_cast<std::uint8_t>(noise + (lit ? 127 : 0)));
    }
  }
  return bytes;
}

std::vector<std::string> cifar10_names() {
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

std::string cifar10_names_text() {
  std::string text;
  for (const std::string& name : cifar10_names()) text += name + "\n";
  return text + "\n";
}

void write_file(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_text(const fs::path& path, const std::string& text) {
  write_file(path, std::vector<std::uint8_t>(text.begin(), text.end()));
}

void write_cifar10_folder(const fs::path& folder, int per_batch, int test_records, bool learnable) {
  auto records = [&](int n, int first, std::uint64_t seed) {
    return learnable ? cifar10_learnable_records(n, first, seed) : cifar10_records(n, first);
  };
  for (int b = 1; b <= 5; ++b)
    write_file(folder / ("data_batch_" + std::to_string(b) + ".bin"),
               records(per_batch, (b - 1) * per_batch, static_cast<std::uint64_t>(b)));
  write_file(folder / "test_batch.bin", records(test_records, 1000, 6));
  write_text(folder / "batches.meta.txt", cifar10_names_text());
}

void write_cifar100_folder(const fs::path& folder, int train_records, int test_records) {
  write_file(folder / "train.bin", cifar100_records(train_records, 0));
  write_file(folder / "test.bin", cifar100_records(test_records, 1000));
  std::string fine, coarse;
  for (int c = 0; c < 100; ++c) fine += "fine" + std::to_string(c) + "\n";
  for (int c = 0; c < 20; ++c) coarse += "coarse" + std::to_string(c) + "\n";
  write_text(folder / "fine_label_names.txt", fine);
  write_text(folder / "coarse_label_names.txt", coarse);
}

}  // namespace cnn::data::test
