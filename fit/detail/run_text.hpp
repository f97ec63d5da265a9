#pragma once
// How a run writes its numbers in what it prints and logs.
#include <string>

namespace cnn::detail {

// The value a float stands for in decimal (0.01f is 0.01, not 0.009999999776482582): what the
// logs show of a rate.
double decimal(float value);
// "0.1", "1e-05": a number as one would write it.
std::string number(double value);
// With `digits` decimals: "0.9312".
std::string fixed(double value, int digits = 4);
// "1 epoch", "3 epochs".
std::string plural(long count, const std::string& word);

}  // namespace cnn::detail
