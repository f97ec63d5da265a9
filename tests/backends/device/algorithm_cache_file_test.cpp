// The file of measured convolution algorithms (backends/device/detail/algorithm_cache_file.hpp):
// a later process reads back what an earlier one kept, under the same environment only; other
// GPUs' lines survive a save; a file that is not a cache, a FIFO or a folder is never read from
// blocking nor replaced.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/device/detail/algorithm_cache_file.hpp"
#include "tests/data/data_test_files.hpp"

using namespace cnn;
namespace fs = std::filesystem;
namespace t = cnn::data::test;

namespace {

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Keys as the CUDA backend writes them: pass, the shape (n c h w, out channels, out h w, kernel h
// w, stride, padding, dilation, groups), the precision (0 fp32, 1 tf32, 2 bf16, 3 fp16). The file
// keeps them as text.
const std::map<std::string, std::string> kChoices = {
    {"0 64 3 32 32 64 32 32 3 3 1 1 1 1 0", "1024 1024 512|1 0 1 1 0.25"},
    {"1 64 32 32 32 32 32 32 3 3 1 2 2 32 0", "0 0 0|0 0 1 1 0.5"}};

}  // namespace

TEST_CASE("an algorithm cache keeps choices for a later reader of the same environment only", "[device][algorithms]") {
  t::TempFolder scratch;
  const fs::path path = scratch / "nested" / "algorithms.txt";  // its folder is made
  AlgorithmCacheFile writer(path, "GPU A", "cuDNN 91900");
  CHECK(writer.load().empty());  // no file yet: nothing, and no problem
  CHECK(writer.problem().empty());
  REQUIRE(writer.save(kChoices));
  CHECK(text_of(path).rfind(AlgorithmCacheFile::kHeader, 0) == 0);

  AlgorithmCacheFile reader(path, "GPU A", "cuDNN 91900");
  CHECK(reader.load() == kChoices);
  // Another version of a library or driver: nothing is taken.
  AlgorithmCacheFile upgraded(path, "GPU A", "cuDNN 92000");
  CHECK(upgraded.load().empty());
  CHECK(upgraded.problem().empty());
  // A tab or a newline in a name cannot forge a line.
  AlgorithmCacheFile odd(path, "GPU\tA\n", "cuDNN 91900");
  CHECK(odd.load().empty());
}

TEST_CASE("an algorithm cache save keeps other GPUs' lines and drops this GPU's stale ones", "[device][algorithms]") {
  t::TempFolder scratch;
  const fs::path path = scratch / "algorithms.txt";
  REQUIRE(AlgorithmCacheFile(path, "GPU B", "cuDNN 91900").save({{"other", "b"}}));
  REQUIRE(AlgorithmCacheFile(path, "GPU A", "cuDNN 90000").save({{"stale", "a"}}));
  AlgorithmCacheFile current(path, "GPU A", "cuDNN 91900");
  REQUIRE(current.save(kChoices));
  CHECK(AlgorithmCacheFile(path, "GPU B", "cuDNN 91900").load() == std::map<std::string, std::string>{{"other", "b"}});
  CHECK(AlgorithmCacheFile(path, "GPU A", "cuDNN 90000").load().empty());
  CHECK(current.load() == kChoices);
  // A second process's choices under the same environment are merged, not lost.
  REQUIRE(AlgorithmCacheFile(path, "GPU A", "cuDNN 91900").save({{"more", "c"}}));
  CHECK(current.load().size() == kChoices.size() + 1);
}

TEST_CASE("an algorithm cache leaves alone what is not one", "[device][algorithms]") {
  t::TempFolder scratch;
  SECTION("a file of something else is neither read nor replaced") {
    const fs::path notes = scratch / "notes.txt";
    std::ofstream(notes) << "my notes\n";
    AlgorithmCacheFile cache(notes, "GPU A", "v1");
    CHECK(cache.load().empty());
    CHECK(cache.problem().find("is not a cnnengine algorithm cache") != std::string::npos);
    CHECK_FALSE(cache.save(kChoices));
    CHECK(cache.problem().find("left as it is") != std::string::npos);
    CHECK(text_of(notes) == "my notes\n");
  }
  SECTION("a FIFO is not opened (it would block) and not replaced") {
    const fs::path fifo = scratch / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    AlgorithmCacheFile cache(fifo, "GPU A", "v1");
    CHECK(cache.load().empty());
    CHECK(cache.problem().find("FIFO") != std::string::npos);
    CHECK_FALSE(cache.save(kChoices));
    CHECK(fs::is_fifo(fifo));
  }
  SECTION("a folder") {
    AlgorithmCacheFile cache(scratch.path(), "GPU A", "v1");
    CHECK(cache.load().empty());
    CHECK_FALSE(cache.save(kChoices));
    CHECK(cache.problem().find("folder") != std::string::npos);
  }
  SECTION("malformed lines are skipped, the rest read") {
    const fs::path path = scratch / "algorithms.txt";
    std::ofstream(path) << AlgorithmCacheFile::kHeader << "\nno tabs here\nGPU A | v1\tkey\tvalue\ttoo many\n"
                        << "GPU A | v1\tkey\tvalue\n" << std::string(10000, 'x') << "\n";
    AlgorithmCacheFile cache(path, "GPU A", "v1");
    CHECK(cache.load() == std::map<std::string, std::string>{{"key", "value"}});
  }
}

TEST_CASE("an algorithm cache holds at most its line limit", "[device][algorithms]") {
  t::TempFolder scratch;
  const fs::path path = scratch / "algorithms.txt";
  std::map<std::string, std::string> many;
  for (std::size_t i = 0; i < AlgorithmCacheFile::kMaxLines + 10; ++i) many[std::to_string(i)] = "v";
  AlgorithmCacheFile cache(path, "GPU A", "v1");
  REQUIRE(cache.save(many));
  CHECK(cache.load().size() == AlgorithmCacheFile::kMaxLines);
}
