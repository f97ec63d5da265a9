// alter_checkpoint IN OUT POINTER VALUE: a copy of checkpoint IN (version 2) whose description
// holds VALUE at the JSON pointer POINTER (e.g. /model/network, /model/preprocessing/height;
// VALUE is read as JSON where it is, else taken as a string), everything else kept, its CRC-32
// made right again: what an attacker can write with a few bytes (Note [Checkpoint layout] in
// models/checkpoint.cpp).
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: alter_checkpoint IN OUT POINTER VALUE\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t kHeader = 24, kCrc = 4;  // magic, version, flags, description bytes; CRC-32
  std::uint64_t meta_bytes = 0;
  if (file.size() < kHeader + kCrc) return std::fprintf(stderr, "%s: too short\n", argv[1]), 1;
  std::memcpy(&meta_bytes, file.data() + 16, sizeof meta_bytes);
  if (meta_bytes > file.size() - kHeader - kCrc) return std::fprintf(stderr, "%s: not a checkpoint\n", argv[1]), 1;

  nlohmann::json meta = nlohmann::json::parse(file.begin() + kHeader, file.begin() + static_cast<long>(kHeader + meta_bytes));
  const nlohmann::json value = nlohmann::json::accept(argv[4]) ? nlohmann::json::parse(argv[4]) : nlohmann::json(argv[4]);
  meta[nlohmann::json::json_pointer(argv[3])] = value;
  const std::string text = meta.dump();

  std::vector<char> out(file.begin(), file.begin() + kHeader);
  const std::uint64_t new_meta_bytes = text.size();
  std::memcpy(out.data() + 16, &new_meta_bytes, sizeof new_meta_bytes);
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), file.begin() + static_cast<long>(kHeader + meta_bytes), file.end() - kCrc);
  const auto crc = static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size())));
  const char* crc_bytes = reinterpret_cast<const char*>(&crc);
  out.insert(out.end(), crc_bytes, crc_bytes + kCrc);
  std::ofstream(argv[2], std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
  return 0;
}
