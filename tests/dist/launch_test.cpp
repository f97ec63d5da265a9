// The launcher's environment read without MPI: a rank of a job, none, or values that do not read.
#include <catch2/catch.hpp>
#include <cstdlib>

#include <cnnengine/base/error.hpp>
#include <cnnengine/dist/mpi_session.hpp>

using namespace cnn;

namespace {

// Sets the variables for the test's duration and puts back what was there.
class Environment {
 public:
  void set(const char* name, const char* value) {
    const char* before = std::getenv(name);
    saved_.push_back({name, before ? std::optional<std::string>(before) : std::nullopt});
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~Environment() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first, it->second->c_str(), 1);
      else unsetenv(it->first);
    }
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

constexpr const char* kVariables[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                                      "MPI_LOCALNRANKS"};

}  // namespace

TEST_CASE("the launcher's environment says which rank of which job this process is", "[dist]") {
  Environment env;
  for (const char* name : kVariables) env.set(name, nullptr);
  CHECK_FALSE(dist::launched_rank());

  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  const auto r = dist::launched_rank();
  REQUIRE(r);
  CHECK(r->rank == 3);
  CHECK(r->ranks == 4);
  CHECK(r->local_rank == 1);
  CHECK(r->local_ranks == 2);
  CHECK(r->launcher == "Open MPI");

  env.set("OMPI_COMM_WORLD_RANK", "4");
  REQUIRE_THROWS_WITH(dist::launched_rank(), Catch::Contains("rank 4 of 4") && Catch::Contains("not a rank"));
  env.set("OMPI_COMM_WORLD_RANK", "two");
  REQUIRE_THROWS_WITH(dist::launched_rank(), Catch::Contains("OMPI_COMM_WORLD_RANK=\"two\" is not a number"));
  env.set("OMPI_COMM_WORLD_RANK", "-1");
  REQUIRE_THROWS_AS(dist::launched_rank(), ConfigError);
  env.set("OMPI_COMM_WORLD_SIZE", nullptr);
  env.set("PMI_SIZE", "2");
  env.set("PMI_RANK", "1");
  const auto pmi = dist::launched_rank();
  REQUIRE(pmi);
  CHECK(pmi->launcher == "PMI");
  CHECK(pmi->rank == 1);
}

TEST_CASE("a build says whether it has MPI", "[dist]") {
#if defined(CNN_TEST_HAVE_MPI)
  CHECK(dist::MpiSession::available());
  CHECK(dist::MpiSession::version().find("MPI") != std::string::npos);
#else
  if (!dist::MpiSession::available()) {
    int argc = 0;
    char** argv = nullptr;
    REQUIRE_THROWS_WITH(dist::MpiSession(&argc, &argv), Catch::Contains("built without MPI"));
  }
#endif
}
