// alter_checkpoint IN OUT POINTER VALUE: a copy of checkpoint IN (version 2) whose description
// holds VALUE at the JSON pointer POINTER (e.g. /model/network, /model/preprocessing/height;
// VALUE is read as JSON where it is, else taken as a string), everything else kept, its CRC-32
// made right again: what an attacker can write with a few bytes (Note [Checkpoint layout] in
// models/checkpoint.cpp). Where the pointer goes on through a string, the string is read as JSON
// and written back: /training/settings/options/--batch is train_images' saved --batch. VALUE
// @FILE is FILE's text, as a string (a value longer than a command line's argument may be).
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

// node[pointer] = value, reading a string on the way as the JSON it holds.
void set_at(nlohmann::json& node, const std::string& pointer, const nlohmann::json& value) {
  if (pointer.empty()) {
    node = value;
    return;
  }
  const std::size_t next = pointer.find('/', 1);
  const std::string key = pointer.substr(1, next == std::string::npos ? std::string::npos : next - 1);
  const std::string rest = next == std::string::npos ? "" : pointer.substr(next);
  if (node.is_string()) {
    nlohmann::json inner = nlohmann::json::parse(node.get<std::string>());
    set_at(inner, pointer, value);
    node = inner.dump();
    return;
  }
  set_at(node.is_array() ? node.at(std::stoul(key)) : node[key], rest, value);
}

}  // namespace

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
  nlohmann::json value;
  if (argv[4][0] == '@') {
    std::ifstream value_file(argv[4] + 1, std::ios::binary);
    value = std::string((std::istreambuf_iterator<char>(value_file)), std::istreambuf_iterator<char>());
  } else {
    value = nlohmann::json::accept(argv[4]) ? nlohmann::json::parse(argv[4]) : nlohmann::json(argv[4]);
  }
  set_at(meta, argv[3], value);
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
