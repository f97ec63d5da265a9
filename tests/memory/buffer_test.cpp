// memory::Buffer gives its block back in its destructor, so giving back must never throw: a
// resource that refuses (a CUDA device that failed) once reached std::terminate from there.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <utility>
#include <vector>

#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"

using namespace cnn::memory;

namespace {

// Hands out host memory and refuses to take it back.
class RefusingResource final : public MemoryResource {
 public:
  std::string name() const override { return "refusing"; }
  ~RefusingResource() override {
    for (auto [ptr, bytes] : kept_) host_resource().deallocate(ptr, bytes);
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override {
    void* ptr = host_resource().allocate(bytes, alignment, category);
    kept_.emplace_back(ptr, bytes);
    return ptr;
  }
  void do_deallocate(void*, std::size_t, std::size_t, Category) override {
    throw std::runtime_error("the device is gone");
  }
  std::vector<std::pair<void*, std::size_t>> kept_;
};

}  // namespace

TEST_CASE("a release the resource refuses is reported and counted, never thrown", "[memory]") {
  RefusingResource refusing;
  const std::size_t before = failed_releases();
  {
    Buffer buffer(refusing, 4096, Category::activations);
    REQUIRE(buffer);
    buffer.release();
    CHECK_FALSE(buffer);
    CHECK(failed_releases() == before + 1);
    buffer = Buffer(refusing, 64, Category::other);
  }  // the destructor's release is refused too, and goes on
  CHECK(failed_releases() == before + 2);
}
