#pragma once
// Records every allocate and deallocate that passes through as a trace line (see trace.hpp).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <ostream>

#include "memory/adaptor.hpp"
#include "memory/live_blocks.hpp"
#include "memory/trace.hpp"

namespace cnn::memory {

class TraceAdaptor final : public Adaptor {
 public:
  // Writes to `out`, which must outlive the adaptor.
  TraceAdaptor(MemoryResource& upstream, std::ostream& out);
  // Creates (truncates) the file; throws ConfigError naming it when it cannot.
  TraceAdaptor(MemoryResource& upstream, const std::filesystem::path& path);
  ~TraceAdaptor() override;

  std::uint64_t events_recorded() const;
  // False once a line could not be written (disk full, closed stream).
  bool good() const;
  void flush();


 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;
  void record(TraceOp op, std::uint64_t id, std::size_t bytes, std::size_t alignment,
              Category category);  // with mutex_ held

  std::unique_ptr<std::ofstream> file_;
  std::ostream& out_;
  mutable std::mutex mutex_;
  std::uint64_t sequence_ = 0;
  std::uint64_t next_id_ = 1;
  LiveBlocks live_;
};

}  // namespace cnn::memory
