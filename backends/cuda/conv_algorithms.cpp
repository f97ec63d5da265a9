#include "backends/cuda/detail/conv_algorithms.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "memory/buffer.hpp"
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::cuda {
namespace {

struct Candidates {
  std::vector<AlgoChoice> fastest_first;
  std::size_t tested_workspace = 0;  // measured with this much scratch; SIZE_MAX for heuristics
  std::size_t asked_workspace = 0;   // what the measurement wanted (its room may have cut it)
  std::size_t largest_useful = 0;    // the largest workspace any usable algorithm asks for
  bool verified = true;              // false: read from a file, workspaces not yet checked with cuDNN
};

// shape (14), pass, device, cuDNN version, precision (its number in Precision: fp32 0 and tf32 1,
// as files that kept a tf32 flag there read), measured
constexpr std::size_t kShapeFields = std::tuple_size_v<ConvShape>;
constexpr std::size_t kPass = kShapeFields, kDevice = kShapeFields + 1, kVersion = kShapeFields + 2,
                      kPrecision = kShapeFields + 3, kMeasured = kShapeFields + 4;
constexpr long long kLastPrecision = static_cast<long long>(Precision::fp16);
using CacheKey = std::array<long long, kShapeFields + 5>;

std::mutex cache_mutex;
std::map<CacheKey, Candidates>& cache() {
  static std::map<CacheKey, Candidates> entries;
  return entries;
}
std::uint64_t measurements = 0;  // under cache_mutex

CacheKey cache_key(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass, bool measured) {
  CacheKey key{};
  for (std::size_t i = 0; i < plan.shape.size(); ++i) key[i] = plan.shape[i];
  key[kPass] = static_cast<int>(pass);
  key[kDevice] = search.device;
  key[kVersion] = static_cast<long long>(cudnnGetVersion());
  key[kPrecision] = static_cast<long long>(search.precision);
  key[kMeasured] = measured;
  return key;
}

bool uses_tensor_ops(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

bool allows_tensor_ops(Precision precision) { return precision != Precision::fp32; }

// The math mode a search runs under.
cudnnMathType_t search_math(Precision precision) {
  return allows_tensor_ops(precision) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

// The three passes' perf structs share their fields; turn any into our choice list.
template <class Perf>
Candidates to_candidates(const Perf* perf, int count, Precision precision, std::size_t tested_workspace) {
  const bool tensor_ops = allows_tensor_ops(precision);
  Candidates out;
  out.tested_workspace = tested_workspace;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || (!tensor_ops && uses_tensor_ops(perf[i].mathType))) continue;
    if (perf[i].memory > tested_workspace) continue;
    // In fp32 the search ran under CUDNN_FMA_MATH, whatever math a result names: run it so
    // (CUDNN_DEFAULT_MATH would let cuDNN use TF32 on Ampere and later).
    const cudnnMathType_t math = tensor_ops ? perf[i].mathType : CUDNN_FMA_MATH;
    AlgoChoice choice{static_cast<int>(perf[i].algo), perf[i].memory, math};
    choice.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    choice.milliseconds = perf[i].time;  // -1 from the heuristics
    out.fastest_first.push_back(choice);
    out.largest_useful = std::max(out.largest_useful, perf[i].memory);
  }
  return out;
}

Candidates heuristics(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass) {
  constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  int returned = 0;
  switch (pass) {
    case ConvAlgoPass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(search.handle, plan.x, plan.w, plan.conv, plan.y,
                                                        static_cast<int>(perf.size()), &returned,
                                                        perf.data()));
      return to_candidates(perf.data(), returned, search.precision, unlimited);
    }
    case ConvAlgoPass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(search.handle, plan.w, plan.y, plan.conv,
                                                             plan.x, static_cast<int>(perf.size()),
                                                             &returned, perf.data()));
      return to_candidates(perf.data(), returned, search.precision, unlimited);
    }
    case ConvAlgoPass::backward_filter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(search.handle, plan.x, plan.y, plan.conv,
                                                               plan.w, static_cast<int>(perf.size()),
                                                               &returned, perf.data()));
      return to_candidates(perf.data(), returned, search.precision, unlimited);
    }
  }
  return {};
}

std::size_t tensor_bytes(int n, int c, int h, int w, Precision precision) {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(c) * static_cast<std::size_t>(h) *
         static_cast<std::size_t>(w) * conv_element_bytes(precision);
}

// What the measurement's scratch memory can give now (under the budget, what it leaves), within
// the device's free memory.
std::size_t scratch_room(const memory::MemoryResource& scratch) {
  std::size_t free = 0, total = 0;
  CNN_CHECK(cudaMemGetInfo(&free, &total));
  return measurement_room(free, scratch.largest_free_block());
}

// Measures every algorithm cuDNN can run with up to `workspace_wanted` bytes of workspace, its
// scratch tensors and workspace taken from search.scratch. None where the tensors do not fit what
// that memory can give now; throws memory::OutOfMemory where it refuses them all the same.
std::optional<Candidates> measure(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                                  std::size_t workspace_wanted) {
  const ConvShape& s = plan.shape;
  using memory::Category;
  const Precision p = search.precision;
  const std::size_t x_bytes = tensor_bytes(s[0], s[1], s[2], s[3], p);
  const std::size_t y_bytes = tensor_bytes(s[0], s[4], s[5], s[6], p);
  const std::size_t w_bytes = tensor_bytes(s[4], s[1] / s[12], s[7], s[8], p);
  const std::optional<std::size_t> workspace_room =
      measurement_workspace(workspace_wanted, x_bytes + y_bytes + w_bytes, scratch_room(*search.scratch));
  if (!workspace_room) return std::nullopt;
  const memory::Buffer x(*search.scratch, x_bytes, Category::workspace);
  const memory::Buffer y(*search.scratch, y_bytes, Category::workspace);
  const memory::Buffer w(*search.scratch, w_bytes, Category::workspace);
  // Every byte 0x3c: each float and each bfloat16 is 0.0115, finite and nonzero; each half would
  // be 1.06, whose sums (a weight gradient's over a batch of pixels) overflow half, so in fp16 every
  // byte is 0x1c: 0.0039. All-zero data draws less power and can time faster than training data does.
  const int byte = p == Precision::fp16 ? 0x1c : 0x3c;
  for (const memory::Buffer* b : {&x, &y, &w}) CNN_CHECK(cudaMemset(b->data(), byte, b->bytes()));
  CNN_CHECK(cudaDeviceSynchronize());

  std::size_t workspace_bytes = *workspace_room;
  std::unique_ptr<memory::Buffer> workspace;
  while (!workspace) {
    try {
      workspace = std::make_unique<memory::Buffer>(*search.scratch, workspace_bytes, Category::workspace);
    } catch (const memory::OutOfMemory&) {
      if (workspace_bytes == 0) throw;
      workspace_bytes = workspace_bytes < (std::size_t{1} << 20) ? 0 : workspace_bytes / 2;
    }
  }

  int returned = 0;
  switch (pass) {
    case ConvAlgoPass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
          search.handle, plan.x, x.data(), plan.w, w.data(), plan.conv, plan.y, y.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.precision, workspace_bytes);
    }
    case ConvAlgoPass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          search.handle, plan.w, w.data(), plan.y, y.data(), plan.conv, plan.x, x.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.precision, workspace_bytes);
    }
    case ConvAlgoPass::backward_filter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          search.handle, plan.x, x.data(), plan.y, y.data(), plan.conv, plan.w, w.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.precision, workspace_bytes);
    }
  }
  return {};
}

const AlgoChoice* fastest_within(const Candidates& candidates, std::size_t limit, bool deterministic) {
  for (const AlgoChoice& c : candidates.fastest_first)
    if (c.workspace <= limit && (c.deterministic || !deterministic)) return &c;
  return nullptr;
}

int algorithm_count(ConvAlgoPass pass) {
  switch (pass) {
    case ConvAlgoPass::forward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case ConvAlgoPass::backward_data: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case ConvAlgoPass::backward_filter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

// The workspace cuDNN says `choice` needs for this plan (under its math type); false where
// cuDNN does not run it here.
bool workspace_of(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass, const AlgoChoice& choice,
                  std::size_t& bytes) {
  if (cudnnSetConvolutionMathType(plan.conv, choice.math) != CUDNN_STATUS_SUCCESS) return false;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  switch (pass) {
    case ConvAlgoPass::forward:
      status = cudnnGetConvolutionForwardWorkspaceSize(search.handle, plan.x, plan.w, plan.conv, plan.y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), &bytes);
      break;
    case ConvAlgoPass::backward_data:
      status = cudnnGetConvolutionBackwardDataWorkspaceSize(
          search.handle, plan.w, plan.y, plan.conv, plan.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
          &bytes);
      break;
    case ConvAlgoPass::backward_filter:
      status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          search.handle, plan.x, plan.y, plan.conv, plan.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
          &bytes);
      break;
  }
  return status == CUDNN_STATUS_SUCCESS;
}

// Measurements read from a file are trusted no further than cuDNN confirms: each algorithm must
// run on this plan, with the workspace cuDNN names for it (within what was measured).
void verify(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass, Candidates& candidates) {
  std::vector<AlgoChoice> kept;
  candidates.largest_useful = 0;
  for (AlgoChoice c : candidates.fastest_first) {
    std::size_t bytes = 0;
    if (!workspace_of(search, plan, pass, c, bytes) || bytes > candidates.tested_workspace) continue;
    c.workspace = bytes;
    candidates.largest_useful = std::max(candidates.largest_useful, bytes);
    kept.push_back(c);
  }
  candidates.fastest_first = std::move(kept);
  candidates.verified = true;
}

// cuDNN documents which of its algorithms sum in a varying order: backward-data's ALGO_0 and
// backward-filter's ALGO_0 and ALGO_3 (atomics); every forward algorithm is deterministic.
bool documented_deterministic(ConvAlgoPass pass, int algo) {
  switch (pass) {
    case ConvAlgoPass::forward: return true;
    case ConvAlgoPass::backward_data: return algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    case ConvAlgoPass::backward_filter:
      return algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 && algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  }
  return false;
}

// Note [Asking cuDNN each algorithm's workspace]
// The heuristics' list (cudnnGet*Algorithm_v7) can leave out an algorithm that runs, or name a
// workspace above what cuDNN then asks for it, and a measurement covers only the shape measured.
// A shape planned at one micro-batch runs at smaller ones too (the last micro-batch of a batch,
// a replay after an out-of-memory failure) within the workspace planned for the largest. So
// where no listed algorithm fits, every algorithm of the pass is asked for its workspace at
// this very shape (cudnnGet*WorkspaceSize: host work, no allocation), the heuristics' ranking
// first and then the rest in cuDNN's order.
std::vector<AlgoChoice> every_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                                        const Candidates& ranked) {
  const cudnnMathType_t math = search_math(search.precision);
  std::vector<int> order;
  for (const AlgoChoice& c : ranked.fastest_first)
    if (std::find(order.begin(), order.end(), c.algo) == order.end()) order.push_back(c.algo);
  for (int algo = 0; algo < algorithm_count(pass); ++algo)
    if (std::find(order.begin(), order.end(), algo) == order.end()) order.push_back(algo);
  std::vector<AlgoChoice> runnable;
  for (int algo : order) {
    AlgoChoice c{algo, 0, math};
    c.deterministic = documented_deterministic(pass, algo);
    if (workspace_of(search, plan, pass, c, c.workspace)) runnable.push_back(c);
  }
  return runnable;
}

const char* pass_name(ConvAlgoPass pass) {
  switch (pass) {
    case ConvAlgoPass::forward: return "forward";
    case ConvAlgoPass::backward_data: return "backward-data";
    case ConvAlgoPass::backward_filter: return "backward-filter";
  }
  return "?";
}

}  // namespace

std::size_t measurement_room(std::size_t device_free, std::size_t scratch_free) {
  // What cuDNN's Find allocates for itself beside the workspace it is given.
  constexpr std::size_t margin = std::size_t{64} << 20;
  const std::size_t room = device_free > margin ? device_free - margin : 0;
  return scratch_free ? std::min(room, scratch_free) : room;
}

std::optional<std::size_t> measurement_workspace(std::size_t wanted, std::size_t tensors, std::size_t room) {
  if (tensors > room) return std::nullopt;
  return std::min(wanted, room - tensors);
}

std::optional<AlgoChoice> find_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                                         std::size_t limit) {
  CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, search_math(search.precision)));
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto& entries = cache();

  const CacheKey heuristic_key = cache_key(search, plan, pass, false);
  auto heuristic = entries.find(heuristic_key);
  if (heuristic == entries.end())
    heuristic = entries.emplace(heuristic_key, heuristics(search, plan, pass)).first;

  const CacheKey measured_key = cache_key(search, plan, pass, true);
  auto measured = entries.find(measured_key);
  // Measuring again pays only when the last measurement was allowed less workspace than this
  // limit allows and some algorithm could use more.
  const std::size_t useful = std::min(limit, heuristic->second.largest_useful);
  if (search.measure && (measured == entries.end() || measured->second.asked_workspace < useful)) {
    // Where not even the scratch tensors fit, the heuristics decide.
    std::optional<Candidates> fresh;
    try {
      fresh = measure(search, plan, pass, useful);
    } catch (const memory::OutOfMemory&) {
    }
    if (fresh) {
      fresh->asked_workspace = useful;
      measured = entries.insert_or_assign(measured_key, std::move(*fresh)).first;
      ++measurements;
    }
  }

  if (measured != entries.end() && !measured->second.verified) verify(search, plan, pass, measured->second);
  CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, search_math(search.precision)));

  const AlgoChoice* choice = nullptr;
  const AlgoChoice* fastest = nullptr;
  if (measured != entries.end()) {
    choice = fastest_within(measured->second, limit, search.deterministic);
    fastest = fastest_within(measured->second, limit, false);
  }
  if (!choice) {
    choice = fastest_within(heuristic->second, limit, search.deterministic);
    fastest = nullptr;  // the heuristics time nothing
  }
  std::vector<AlgoChoice> every;
  if (!choice) {  // Note [Asking cuDNN each algorithm's workspace]
    every = every_algorithm(search, plan, pass, heuristic->second);
    CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, search_math(search.precision)));
    for (const AlgoChoice& c : every)
      if (!choice && c.workspace <= limit && (c.deterministic || !search.deterministic)) choice = &c;
    // Planning: the leanest algorithm, over the limit (the plan then holds its workspace).
    if (!choice && search.leanest_over_limit)
      for (const AlgoChoice& c : every)
        if ((c.deterministic || !search.deterministic) && (!choice || c.workspace < choice->workspace)) choice = &c;
  }
  if (!choice) return std::nullopt;
  AlgoChoice chosen = *choice;
  chosen.fastest_milliseconds = fastest && fastest->milliseconds >= 0 ? fastest->milliseconds : -1;
  return chosen;
}

AlgoChoice choose_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                            std::size_t limit) {
  std::optional<AlgoChoice> choice = find_algorithm(search, plan, pass, limit);
  if (!choice) {
    const ConvShape& s = plan.shape;
    throw DeviceError(
        std::string("cuDNN has no convolution ") + pass_name(pass) + " algorithm for input [" +
        std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" +
        std::to_string(s[3]) + "], " + std::to_string(s[4]) + " filters of " + std::to_string(s[7]) +
        "x" + std::to_string(s[8]) + " (dilation " + std::to_string(s[11]) + ", groups " + std::to_string(s[12]) +
        ") whose workspace fits " + std::to_string(limit) + " bytes" +
        (search.deterministic ? " and that is deterministic" : ""));
  }
  return *choice;
}

namespace {

// A line of the algorithm cache file: "pass n c h w k oh ow kh kw stride pad dilation groups
// channels_last precision" (channels_last 1 or 0; Precision's number: 0 fp32, 1 tf32, 2 bf16,
// 3 fp16) and "tested asked useful|algo workspace math deterministic ms|...". Lines written before
// dilation, groups and the layout were part of the key have fields fewer: they are skipped (the
// shape is measured again), and stay in the file unused until its environment changes.
constexpr int kKeyFields = static_cast<int>(kShapeFields) + 2;

std::string key_text(const CacheKey& key) {
  std::string text = std::to_string(key[kPass]);
  for (std::size_t i = 0; i < kShapeFields; ++i) text += " " + std::to_string(key[i]);
  return text + " " + std::to_string(key[kPrecision]);
}

std::string value_text(const Candidates& c) {
  std::ostringstream out;
  out << c.tested_workspace << " " << c.asked_workspace << " " << c.largest_useful;
  for (const AlgoChoice& a : c.fastest_first)
    out << "|" << a.algo << " " << a.workspace << " " << static_cast<int>(a.math) << " " << (a.deterministic ? 1 : 0)
        << " " << a.milliseconds;
  return out.str();
}

bool valid_math(long long math) {
  return math == CUDNN_DEFAULT_MATH || math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
         math == CUDNN_FMA_MATH;
}

// Reads `count` whole numbers in [0, most] from `in`; false on anything else.
bool read_numbers(std::istringstream& in, long long* out, int count, long long most) {
  for (int i = 0; i < count; ++i)
    if (!(in >> out[i]) || out[i] < 0 || out[i] > most) return false;
  return true;
}

bool parse_line(const std::string& key, const std::string& value, CacheKey& k, Candidates& c) {
  constexpr long long kLargestDimension = std::numeric_limits<int>::max();
  constexpr long long kLargestBytes = 1LL << 50;
  std::istringstream in(key);
  long long fields[kKeyFields];
  if (!read_numbers(in, fields, kKeyFields, kLargestDimension)) return false;
  in >> std::ws;
  if (!in.eof()) return false;
  const long long precision = fields[kKeyFields - 1];
  if (fields[0] > 2 || precision > kLastPrecision) return false;
  k = CacheKey{};
  for (std::size_t i = 0; i < kShapeFields; ++i) {
    // Every field is at least 1, but the padding (index 10), which may be 0, and the layout
    // (index 13), 0 or 1.
    if (fields[i + 1] < (i == 10 || i == 13 ? 0 : 1) || (i == 13 && fields[i + 1] > 1)) return false;
    k[i] = fields[i + 1];
  }
  if (k[1] % k[12] != 0 || k[4] % k[12] != 0) return false;  // groups divide both channel counts
  k[kPass] = fields[0];
  k[kPrecision] = precision;
  k[kMeasured] = 1;
  const auto pass = static_cast<ConvAlgoPass>(fields[0]);

  std::istringstream parts(value);
  std::string part;
  if (!std::getline(parts, part, '|')) return false;
  std::istringstream head(part);
  long long sizes[3];
  if (!read_numbers(head, sizes, 3, kLargestBytes)) return false;
  c = Candidates{};
  c.tested_workspace = static_cast<std::size_t>(sizes[0]);
  c.asked_workspace = static_cast<std::size_t>(sizes[1]);
  c.verified = false;
  constexpr int kMostCandidates = 32;
  while (std::getline(parts, part, '|')) {
    if (static_cast<int>(c.fastest_first.size()) == kMostCandidates) return false;
    std::istringstream fields_in(part);
    long long numbers[4];
    float ms = -1;
    if (!read_numbers(fields_in, numbers, 4, kLargestBytes) || !(fields_in >> ms) || !std::isfinite(ms)) return false;
    if (numbers[0] >= algorithm_count(pass) || numbers[1] > sizes[0] || !valid_math(numbers[2]) || numbers[3] > 1)
      return false;
    if (!allows_tensor_ops(static_cast<Precision>(precision)) &&
        uses_tensor_ops(static_cast<cudnnMathType_t>(numbers[2])))
      return false;
    AlgoChoice a{static_cast<int>(numbers[0]), static_cast<std::size_t>(numbers[1]),
                 static_cast<cudnnMathType_t>(numbers[2])};
    a.deterministic = numbers[3] == 1;
    a.milliseconds = ms;
    c.fastest_first.push_back(a);
    c.largest_useful = std::max(c.largest_useful, a.workspace);
  }
  return !c.fastest_first.empty();
}

}  // namespace

std::map<std::string, std::string> export_measurements(int device) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  const long long version = static_cast<long long>(cudnnGetVersion());
  std::map<std::string, std::string> lines;
  for (const auto& [key, candidates] : cache())
    if (key[kMeasured] == 1 && key[kDevice] == device && key[kVersion] == version && candidates.verified)
      lines[key_text(key)] = value_text(candidates);
  return lines;
}

int import_measurements(int device, const std::map<std::string, std::string>& lines) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  const long long version = static_cast<long long>(cudnnGetVersion());
  int taken = 0;
  for (const auto& [key, value] : lines) {
    CacheKey k;
    Candidates c;
    if (!parse_line(key, value, k, c)) continue;
    k[kDevice] = device;
    k[kVersion] = version;
    if (cache().emplace(k, std::move(c)).second) ++taken;  // this process's own measurements stay
  }
  return taken;
}

std::uint64_t measurements_made() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return measurements;
}

cudnnDataType_t conv_data_type(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return CUDNN_DATA_BFLOAT16;
    case Precision::fp16:
      return CUDNN_DATA_HALF;
    case Precision::fp32:
    case Precision::tf32:
      return CUDNN_DATA_FLOAT;
  }
  return CUDNN_DATA_FLOAT;
}

std::size_t conv_element_bytes(Precision precision) {
  return conv_data_type(precision) == CUDNN_DATA_FLOAT ? sizeof(float) : 2;
}

}  // namespace cnn::cuda
