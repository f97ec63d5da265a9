#pragma once
// CLI11 validators whose messages say what an option needs ("--batch: must be a positive
// integer, got '0'") instead of CLI11's numeric ranges.
#include <CLI/CLI.hpp>
#include <climits>

namespace cnn::app {

CLI::Validator positive_integer(long long max = INT_MAX);
// An integer in [min, max]; `note` follows the range in the message, e.g. "(0: all cores)".
CLI::Validator integer_between(long long min, long long max, const std::string& note = "");
// Finite numbers that fit a float (never NaN): > 0, >= 0, in [0, 1), in (0, 1), and in [0, most].
CLI::Validator positive_number();
CLI::Validator non_negative_number();
CLI::Validator fraction_below_one();
CLI::Validator fraction_between_zero_and_one();
CLI::Validator fraction_up_to(double most);
// A byte count memory::parse_bytes reads ("512MiB") of at least one byte.
CLI::Validator positive_size();

}  // namespace cnn::app
