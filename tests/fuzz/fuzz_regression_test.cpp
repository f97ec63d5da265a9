// Every input a fuzzer once failed on (fuzz/regressions/<harness>/), and the inputs made there to
// reach each reader's error paths, goes through the code path of its fuzzer (fuzz/fuzz_targets.hpp)
// and must end in success or the reader's own error. The fuzz build (scripts/fuzz.sh) replays them
// under the sanitizers too, and so does the sanitized test suite.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz/fuzz_targets.hpp"
#include "tests/data/data_test_files.hpp"

namespace fs = std::filesystem;

namespace {

// Every harness has a folder of inputs that exercise its reader's error paths: an empty or missing
// one would let its case pass having checked nothing.
std::vector<fs::path> regression_inputs(const std::string& harness) {
  const fs::path all = fs::path(CNN_TEST_DATA_DIR).parent_path().parent_path() / "fuzz" / "regressions";
  INFO("the inputs of fuzz_" << harness << ": " << (all / harness).string());
  REQUIRE(fs::is_directory(all / harness));
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator(all / harness))
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  REQUIRE_FALSE(inputs.empty());
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

// Each input through its fuzzer's path; where `refused`, every input of the folder is one the
// reader must refuse with its own error (all of those made to reach its error paths are).
template <class Run>
void replay(const std::string& harness, Run run, bool refused = false) {
  const std::vector<fs::path> inputs = regression_inputs(harness);
  for (const fs::path& input : inputs) {
    INFO(input.string());
    const std::vector<std::uint8_t> bytes = cnn::data::test::read_bytes(input);
    if constexpr (std::is_same_v<decltype(run(bytes.data(), bytes.size())), bool>) {
      bool accepted = false;
      CHECK_NOTHROW(accepted = run(bytes.data(), bytes.size()));
      if (refused) CHECK_FALSE(accepted);
    } else {
      CHECK_NOTHROW(run(bytes.data(), bytes.size()));
    }
  }
}

}  // namespace

TEST_CASE("fuzz regressions: IDX files", "[data][fuzz]") { replay("idx", cnn::fuzz::run_idx, true); }
TEST_CASE("fuzz regressions: images", "[data][fuzz]") { replay("image", cnn::fuzz::run_image); }
TEST_CASE("fuzz regressions: network text", "[fuzz]") { replay("network_text", cnn::fuzz::run_network_text); }
TEST_CASE("fuzz regressions: checkpoints", "[fuzz]") { replay("checkpoint", cnn::fuzz::run_checkpoint, true); }
TEST_CASE("fuzz regressions: ONNX models", "[fuzz][onnx]") { replay("onnx", cnn::fuzz::run_onnx); }
