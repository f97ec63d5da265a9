#include "alternating.hpp"

#include <algorithm>
#include <chrono>
#include <random>

namespace recompute_bench {

SyntheticBatches::SyntheticBatches(cnn::Shape sample, int classes, int batch, int count, unsigned seed)
    : sample_floats_(sample.elements()), batch_(batch), count_(count) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> noise(0.f, 0.5f);
  const std::size_t samples = static_cast<std::size_t>(batch) * static_cast<std::size_t>(count);
  images_.resize(samples * sample_floats_);
  labels_.resize(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    const int label = static_cast<int>(random() % static_cast<unsigned>(classes));
    labels_[i] = label;
    for (std::size_t k = 0; k < sample_floats_; ++k) {
      const bool lit = k * static_cast<std::size_t>(classes) / sample_floats_ == static_cast<std::size_t>(label);
      images_[i * sample_floats_ + k] = noise(random) + (lit ? 0.5f : 0.f);
    }
  }
}

cnn::Batch SyntheticBatches::batch(int i) const {
  const std::size_t first = static_cast<std::size_t>(i % count_) * static_cast<std::size_t>(batch_);
  return cnn::Batch{images_.data() + first * sample_floats_, labels_.data() + first, batch_};
}

std::vector<double> Rates::ratios() const {
  std::vector<double> out;
  for (std::size_t r = 0; r < first.size(); ++r) out.push_back(second[r] / first[r]);
  return out;
}

namespace {
double samples_per_second(cnn::Trainer& trainer, const SyntheticBatches& data, int first_step, int steps) {
  const auto start = std::chrono::steady_clock::now();
  long samples = 0;
  for (int s = 0; s < steps; ++s) samples += trainer.train_step(data.batch(first_step + s)).samples;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(samples) / seconds;
}
}  // namespace

Rates time_alternately(cnn::Trainer& first, cnn::Trainer& second, const SyntheticBatches& data, int first_batch,
                       int rounds, int steps) {
  Rates rates;
  for (int r = 0; r < rounds; ++r) {
    const int step = first_batch + r * steps;
    if (r % 2 == 0) {
      rates.first.push_back(samples_per_second(first, data, step, steps));
      rates.second.push_back(samples_per_second(second, data, step, steps));
    } else {
      rates.second.push_back(samples_per_second(second, data, step, steps));
      rates.first.push_back(samples_per_second(first, data, step, steps));
    }
  }
  return rates;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace recompute_bench
