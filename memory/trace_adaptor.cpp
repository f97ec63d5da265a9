#include "memory/trace_adaptor.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {
namespace {

std::unique_ptr<std::ofstream> open_trace(const std::filesystem::path& path) {
  auto file = std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc);
  if (!*file) throw ConfigError("cannot create memory trace '" + path.string() + "'");
  return file;
}

}  // namespace

TraceAdaptor::TraceAdaptor(MemoryResource& upstream, std::ostream& out)
    : Adaptor(upstream), out_(out) {
  out_ << kTraceHeader << '\n';
}

TraceAdaptor::TraceAdaptor(MemoryResource& upstream, const std::filesystem::path& path)
    : Adaptor(upstream), file_(open_trace(path)), out_(*file_) {
  out_ << kTraceHeader << '\n';
}

TraceAdaptor::~TraceAdaptor() { out_.flush(); }

void* TraceAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(bytes, alignment, category);
  } catch (const OutOfMemory&) {
    std::lock_guard lock(mutex_);
    record(TraceOp::failed, 0, bytes, alignment, category);
    throw;
  }
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  live_.add(ptr, {bytes, alignment, category, id});
  record(TraceOp::allocate, id, bytes, alignment, category);
  return ptr;
}

void TraceAdaptor::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  LiveBlock live;
  {
    // Recorded before the upstream frees it: once freed, the address may be handed out again
    // and its next allocation must come later in the trace.
    std::lock_guard lock(mutex_);
    live = live_.remove(ptr, bytes, *this);
    record(TraceOp::deallocate, live.id, bytes, live.alignment, live.category);
  }
  // The upstream is told the alignment it was asked for, whatever the caller says now.
  upstream_.deallocate(ptr, bytes, live.alignment, live.category);
}

void TraceAdaptor::record(TraceOp op, std::uint64_t id, std::size_t bytes, std::size_t alignment,
                          Category category) {
  write_trace_event(out_, TraceEvent{sequence_++, op, id, bytes, alignment, category});
}

std::uint64_t TraceAdaptor::events_recorded() const {
  std::lock_guard lock(mutex_);
  return sequence_;
}

bool TraceAdaptor::good() const {
  std::lock_guard lock(mutex_);
  return out_.good();
}

void TraceAdaptor::flush() {
  std::lock_guard lock(mutex_);
  out_.flush();
}

}  // namespace cnn::memory
