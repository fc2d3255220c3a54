// See comparison_record.h.
#include "reports/comparison_record.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/json_reader.h"
#include "reports/run_record.h"

namespace pipebal::reports {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int> read_balance(const JsonReader& r) {
  std::vector<int> balance;
  for (int64_t layers : r.at("balance").integers(1, std::numeric_limits<int>::max())) {
    balance.push_back(static_cast<int>(layers));
  }
  return balance;
}

// The busiest device's bytes from a list per device; NaN when absent or empty.
double busiest(const JsonReader& r, const char* key) {
  if (!r.has(key)) return kNaN;
  const std::vector<int64_t> bytes = r.at(key).integers(0);
  return bytes.empty() ? kNaN : static_cast<double>(*std::max_element(bytes.begin(), bytes.end()));
}

// What both documents say of a configuration the same way.
void read_times(const JsonReader& r, int count, ComparedConfiguration& c) {
  c.balance = read_balance(r);
  c.predicted_ms = read_ms(r.at("predicted_step_ms"));
  c.measured_ms = read_ms(r.at("measured_step_ms"));
  c.predicted_in_turns_ms = read_ms_or_nan(r, "predicted_in_turns_step_ms");
  c.predicted_rank = static_cast<int>(r.at("predicted_rank").integer(1, count));
  c.measured_rank = static_cast<int>(r.at("measured_rank").integer(1, count));
}

std::string count_of(int n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

Comparison comparison_from_json(const nlohmann::json& doc, const std::string& file) {
  const JsonReader r(doc, file);
  const std::string schema = r.get<std::string>("schema");
  const bool plans = schema.rfind("pipebal.plans-comparison/", 0) == 0;
  Comparison comparison;
  comparison.source = plans ? "validate --plans" : "validate --auto";
  comparison.model = r.get_or<std::string>("model", "");
  if (r.has("input_shape")) comparison.input_shape = r.at("input_shape").integers(1);
  const char* list = plans ? "plans" : "configurations";
  const std::vector<JsonReader> entries = r.at(list).elements();
  if (entries.empty()) r.at(list).fail("is empty: the comparison trained nothing");
  const int count = static_cast<int>(entries.size());
  for (const JsonReader& e : entries) {
    ComparedConfiguration c;
    read_times(e, count, c);
    const int chunks = static_cast<int>(e.at("chunks").integer(1));
    const std::string schedule = e.get<std::string>("schedule");
    const std::string checkpoint = e.get<std::string>("checkpoint");
    if (plans) {
      c.name = e.get<std::string>("file");
      std::string shape = schedule;
      if (e.has("virtual_stages")) {
        shape += fmt::format(" ({} stages per device)", e.at("virtual_stages").integer(1));
      }
      if (e.has("weight_delays")) {
        shape += fmt::format(" (W delays {})", fmt::join(e.at("weight_delays").integers(-1), ","));
      }
      c.configuration = fmt::format("{}, {}, checkpoint {}", shape,
                                    count_of(chunks, "micro-batch", "micro-batches"), checkpoint);
      c.predicted_peak_bytes = busiest(e, "predicted_device_bytes");
      c.measured_peak_bytes = busiest(e, "measured_device_bytes");
    } else {
      c.name = fmt::format("{}", fmt::join(e.at("labels").as<std::vector<std::string>>(), ", "));
      const int stages = static_cast<int>(e.at("stages").integer(1));
      const int threads = static_cast<int>(e.get_or<int64_t>("threads_per_stage", 0));
      c.configuration =
          stages == 1
              ? fmt::format("the plain model{}",
                            threads > 1 ? fmt::format(" on {} threads", threads) : "")
              : fmt::format("{}, {}, {}, checkpoint {}", count_of(stages, "stage", "stages"),
                            count_of(chunks, "micro-batch", "micro-batches"), schedule, checkpoint);
      c.predicted_peak_bytes = kNaN;
      c.measured_peak_bytes = kNaN;
    }
    comparison.configurations.push_back(std::move(c));
  }
  return comparison;
}

}  // namespace pipebal::reports
