#if CNN_HAVE_MPI
#include "dist/detail/mpi_communicator.hpp"

#include <algorithm>

#include <cnnengine/base/error.hpp>

namespace cnn::dist {
namespace {

// MPI counts are ints: a larger block goes in pieces of at most this many elements.
constexpr std::size_t kMaxCount = std::size_t{1} << 30;

int count_of(std::size_t n) { return static_cast<int>(n); }

}  // namespace

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char words[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, words, &length);
  throw DeviceError(std::string("MPI: ") + call + " failed: " + std::string(words, static_cast<std::size_t>(length)));
}

MpiCommunicator::MpiCommunicator() {
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &ranks_), "MPI_Comm_size");
}

std::string mpi_library_version() {
  char words[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(words, &length);
  const std::string text(words, static_cast<std::size_t>(length));
  return text.substr(0, text.find_first_of(",\n"));
}

std::string MpiCommunicator::describe() const {
  return "MPI (" + mpi_library_version() + "), " + std::to_string(ranks_) + " ranks";
}

std::size_t MpiCommunicator::reserved_bytes(std::size_t in_flight_bytes) const {
  // An in-place MPI_Iallreduce (Open MPI's libnbc) works in a temporary as large as its message,
  // held until it completes.
  return ranks_ > 1 ? in_flight_bytes : 0;
}

void MpiCommunicator::sum_host(std::span<double> values) { reduce_host(values, MPI_SUM); }

void MpiCommunicator::max_host(std::span<double> values) { reduce_host(values, MPI_MAX); }

void MpiCommunicator::reduce_host(std::span<double> values, MPI_Op op) {
  for (std::size_t done = 0; done < values.size(); done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, values.size() - done);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data() + done, count_of(n), MPI_DOUBLE, op, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
}

void MpiCommunicator::broadcast_host(std::span<std::byte> bytes) {
  for (std::size_t done = 0; done < bytes.size(); done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, bytes.size() - done);
    check_mpi(MPI_Bcast(bytes.data() + done, count_of(n), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void MpiCommunicator::sum(const Tensor& values) {
  for (std::size_t done = 0; done < values.elements(); done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, values.elements() - done);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data + done, count_of(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
}

void MpiCommunicator::start_sum(const Tensor& values) {
  for (std::size_t done = 0; done < values.elements(); done += kMaxCount) {
    const std::size_t n = std::min(kMaxCount, values.elements() - done);
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, values.data + done, count_of(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                             &request),
              "MPI_Iallreduce");
    started_.push_back(request);
  }
}

void MpiCommunicator::progress() {
  if (started_.empty()) return;
  int done = 0;
  check_mpi(MPI_Testall(count_of(started_.size()), started_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (done) started_.clear();
}

void MpiCommunicator::wait_started() {
  if (started_.empty()) return;
  check_mpi(MPI_Waitall(count_of(started_.size()), started_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  started_.clear();
}

}  // namespace cnn::dist
#endif
