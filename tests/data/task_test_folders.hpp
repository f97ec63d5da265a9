#pragma once
// Helpers for the tests of the data sets beyond classification: writing segmentation and
// labels.csv folders, and checking that an open or a load fails naming the file at fault.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "cifar_test_files.hpp"  // write_text
#include "data/data_error.hpp"

namespace cnn::data::test {

// Runs fn, expecting a DataError that names `named` ("<its full path>: ...") and holds every word.
template <typename Fn>
void expect_data_error(Fn fn, const std::filesystem::path& named, const std::vector<std::string>& words) {
  try {
    fn();
    FAIL("expected a DataError naming " << named);
  } catch (const DataError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(full_path(named) + ":") != std::string::npos);
    for (const std::string& w : words) CHECK(what.find(w) != std::string::npos);
  }
}

// A w x h RGB image whose pixel (y, x) is (seed + 10y + x, 2 * that, 3 * that) modulo 256.
std::vector<std::uint8_t> rgb_ramp(int width, int height, int seed);

// side/images/<name>.png (rgb_ramp of `seed`) and side/masks/<name>.png (the mask values, row by
// row, a grey 8-bit PNG).
void write_pair(const std::filesystem::path& side, const std::string& name, int width, int height, int seed,
                const std::vector<std::uint8_t>& mask);

// A segmentation folder: train/ with a, b, c and test/ with d, e, all 4x2, their masks' values 0,
// 1, 2 and 255 (three classes).
void write_segmentation_folder(const std::filesystem::path& root);
// The mask write_segmentation_folder gives the image of this seed (0 for a .. 4 for e).
std::vector<std::uint8_t> segmentation_mask(int seed);

}  // namespace cnn::data::test
