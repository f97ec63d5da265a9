// Every input a fuzzer once failed on (fuzz/regressions/<harness>/) goes through the code path
// of its fuzzer (fuzz/fuzz_targets.hpp) and must end in success or the reader's own error. The
// fuzz build (scripts/fuzz.sh) replays them under the sanitizers too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "data/data_test_files.hpp"
#include "fuzz_targets.hpp"

namespace fs = std::filesystem;

namespace {

// A harness that never failed has no folder.
std::vector<fs::path> regression_inputs(const std::string& harness) {
  const fs::path all = fs::path(CNN_TEST_DATA_DIR).parent_path().parent_path() / "fuzz" / "regressions";
  REQUIRE(fs::is_directory(all));
  std::vector<fs::path> inputs;
  if (!fs::is_directory(all / harness)) return inputs;
  for (const auto& entry : fs::directory_iterator(all / harness))
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

void replay(const std::string& harness, void (*run)(const std::uint8_t*, std::size_t)) {
  const std::vector<fs::path> inputs = regression_inputs(harness);
  for (const fs::path& input : inputs) {
    INFO(input.string());
    const std::vector<std::uint8_t> bytes = cnn::data::test::read_bytes(input);
    CHECK_NOTHROW(run(bytes.data(), bytes.size()));
  }
}

}  // namespace

TEST_CASE("fuzz regressions: IDX files", "[data][fuzz]") { replay("idx", cnn::fuzz::run_idx); }
TEST_CASE("fuzz regressions: images", "[data][fuzz]") { replay("image", cnn::fuzz::run_image); }
TEST_CASE("fuzz regressions: network text", "[fuzz]") { replay("network_text", cnn::fuzz::run_network_text); }
TEST_CASE("fuzz regressions: checkpoints", "[fuzz]") { replay("checkpoint", cnn::fuzz::run_checkpoint); }
