#pragma once
// The PNG of reserved bytes over steps, one panel per workload and one line per strategy, drawn
// by gnuplot (pngcairo where it has it, else png).
#include <filesystem>
#include <string>

#include "comparison.hpp"

namespace alloc_compare {

// Says where the plot went, or why there is none (no gnuplot: not an error).
std::string draw_plot(const Comparison& comparison, const std::string& title, const std::filesystem::path& png);

}  // namespace alloc_compare
