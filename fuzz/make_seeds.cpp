// Writes a small seed corpus for each fuzzer: make_seeds <folder> fills <folder>/<harness>/
// with valid files (IDX raw, gzip and two gzip members; PNG, JPEG and BMP; network texts; a
// checkpoint of the checkpoint fuzzer's network).
#include <cstdint>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_targets.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

void write(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

Bytes idx(const std::vector<std::uint32_t>& dims, std::uint8_t first_value) {
  Bytes bytes = {0, 0, 8, static_cast<std::uint8_t>(dims.size())};
  std::size_t elements = 1;
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(d >> shift));
    elements *= d;
  }
  for (std::size_t i = 0; i < elements; ++i) bytes.push_back(static_cast<std::uint8_t>((first_value + i) % 3));
  return bytes;
}

Bytes gzip(const Bytes& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, bytes.size()) + 32);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int code = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (code != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

void write_idx_seeds(const fs::path& dir) {
  const Bytes images = idx({3, 4, 5}, 0), labels = idx({3}, 1);
  write(dir / "images.idx", images);
  write(dir / "labels.idx", labels);
  write(dir / "images.idx.gz", gzip(images));
  write(dir / "labels.idx.gz", gzip(labels));
  Bytes two_members = gzip(Bytes(labels.begin(), labels.begin() + 6));
  const Bytes second = gzip(Bytes(labels.begin() + 6, labels.end()));
  two_members.insert(two_members.end(), second.begin(), second.end());
  write(dir / "labels_two_members.idx.gz", two_members);
}

void collect(void* context, void* data, int size) {
  auto* out = static_cast<Bytes*>(context);
  out->insert(out->end(), static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + size);
}

void write_image_seeds(const fs::path& dir) {
  constexpr int kWidth = 7, kHeight = 5;
  for (int channels : {1, 2, 3, 4}) {
    Bytes pixels(kWidth * kHeight * static_cast<std::size_t>(channels));
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 37 % 256);
    const std::string name = std::to_string(channels) + "ch";
    Bytes png, jpg, bmp;
    stbi_write_png_to_func(collect, &png, kWidth, kHeight, channels, pixels.data(), kWidth * channels);
    stbi_write_jpg_to_func(collect, &jpg, kWidth, kHeight, channels, pixels.data(), 90);
    stbi_write_bmp_to_func(collect, &bmp, kWidth, kHeight, channels, pixels.data());
    write(dir / (name + ".png"), png);
    write(dir / (name + ".jpg"), jpg);
    write(dir / (name + ".bmp"), bmp);
  }
}

void write_network_text_seeds(const fs::path& dir) {
  const std::vector<std::string> texts = {
      "conv 4 3 pad=1\nrelu\nmaxpool 2\nflatten\ndense 10\n",
      "# a comment\nconv 8 5 stride=2 pad=2 bias=0 as=a\nbatchnorm\nrelu\nconv 8 3 pad=1\nadd a\n"
      "avgpool 2 stride=2\nglobalavgpool\nflatten\ndropout 0.5\ndense 10\n",
      "conv 4 3 pad=1 as=x in=input\nconv 4 3 pad=1 in=input\nadd x as=y\nrelu in=y\nmaxpool 4 pad=1\nflatten\ndense 10",
  };
  for (std::size_t i = 0; i < texts.size(); ++i) write(dir / ("net" + std::to_string(i) + ".txt"), Bytes(texts[i].begin(), texts[i].end()));
}

void write_checkpoint_seeds(const fs::path& dir) {
  cnn::CpuBackend backend(1);
  const cnn::Network network = cnn::parse_network(cnn::fuzz::kCheckpointNetwork, cnn::fuzz::kCheckpointInput,
                                                  cnn::fuzz::kCheckpointClasses);
  cnn::ParameterStore params(network, backend, cnn::memory::host_resource(), 2, 7);
  cnn::save_weights(dir / "weights.ckpt", network, params);
  // A run's whole state: a description with a history, and the optimizer's block.
  cnn::TrainingCheckpoint training;
  training.trainer = {3, 4, 1};
  training.progress.steps = {{2.0f, 0.25f, 1e-3f}, {1.5f, 0.5f, 1e-3f}, {1.25f, 0.5f, 9e-4f}};
  training.progress.epochs = {{1, 1.5, 0.4, 1.4, 0.45, 0.1, 100.0}};
  training.settings = R"({"options": {}, "metrics_bytes": 0})";
  cnn::save_checkpoint(dir / "run.ckpt", network, params, cnn::describe_model(network), &training);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  // ONNX models are seeded from fuzz/regressions/onnx/ (small models of tests/models/
  // make_onnx_import_models.py), which the fuzzer reads beside this folder.
  for (const char* harness : {"idx", "image", "network_text", "checkpoint", "onnx"}) fs::create_directories(root / harness);
  write_idx_seeds(root / "idx");
  write_image_seeds(root / "image");
  write_network_text_seeds(root / "network_text");
  write_checkpoint_seeds(root / "checkpoint");
  return 0;
}
