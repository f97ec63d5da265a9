#pragma once
// The check the data-set tests share: open_dataset refuses a folder with a DataError naming the
// file at fault ("<its full path>: ...") and saying what is wrong.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>

namespace cnn::data::test {

inline void expect_open_error(const std::filesystem::path& folder, const std::filesystem::path& named,
                              const std::string& words) {
  try {
    open_dataset(folder);
    FAIL("expected a DataError naming " << named);
  } catch (const DataError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(full_path(named) + ":") != std::string::npos);
    CHECK(what.find(words) != std::string::npos);
  }
}

}  // namespace cnn::data::test
