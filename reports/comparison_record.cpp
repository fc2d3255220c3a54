// See comparison_record.h.
#include "pipebal/reports/comparison_record.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/json_reader.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/reports/run_record.h"

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

// The busiest device's bytes from a list of one per device (`devices`); NaN when absent or empty.
double busiest(const JsonReader& r, const char* key, int devices) {
  if (!r.has(key)) return kNaN;
  const std::vector<int64_t> bytes = r.at(key).integers(0);
  if (!bytes.empty() && static_cast<int>(bytes.size()) != devices) {
    r.at(key).fail(fmt::format("has {} entries for {} device{}", bytes.size(), devices,
                               devices == 1 ? "" : "s"));
  }
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

// Reads a name with `parse` (the schedule's own parser), failing at the field with its message.
template <typename Parse>
void parse_or_fail(const JsonReader& field, Parse parse) {
  try {
    parse(field.as<std::string>());
  } catch (const std::invalid_argument& error) {
    field.fail(std::string("is not valid: ") + error.what());
  }
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
  std::vector<bool> predicted_ranks(count + 1), measured_ranks(count + 1);
  for (const JsonReader& e : entries) {
    ComparedConfiguration c;
    read_times(e, count, c);
    // Ranks order the configurations: each rank once.
    for (auto [field, rank, seen] :
         {std::tuple{"predicted_rank", c.predicted_rank, &predicted_ranks},
          std::tuple{"measured_rank", c.measured_rank, &measured_ranks}}) {
      if ((*seen)[rank]) e.at(field).fail(fmt::format("is {}, as another configuration's", rank));
      (*seen)[rank] = true;
    }
    const int chunks = static_cast<int>(e.at("chunks").integer(1, kMaxTimelineMicroBatches));
    const std::string schedule = e.get<std::string>("schedule");
    const std::string checkpoint = e.get<std::string>("checkpoint");
    parse_or_fail(e.at("schedule"), pipeline::parse_schedule_kind);
    parse_or_fail(e.at("checkpoint"), pipeline::parse_checkpoint_mode);
    const int balance_stages = static_cast<int>(c.balance.size());
    if (plans) {
      c.name = e.get<std::string>("file");
      std::string shape = schedule;
      int per_device = 1;
      if (e.has("virtual_stages")) {
        per_device = static_cast<int>(e.at("virtual_stages").integer(1, kMaxTimelineStages));
        shape += fmt::format(" ({} stages per device)", per_device);
      }
      if (balance_stages % per_device != 0) {
        e.at("balance").fail(fmt::format("has {} stages, not whole rounds of {} per device",
                                         balance_stages, per_device));
      }
      if (e.has("weight_delays")) {
        shape += fmt::format(" (W delays {})", fmt::join(e.at("weight_delays").integers(-1), ","));
      }
      c.configuration = fmt::format("{}, {}, checkpoint {}", shape,
                                    count_of(chunks, "micro-batch", "micro-batches"), checkpoint);
      const int devices = balance_stages / per_device;
      c.predicted_peak_bytes = busiest(e, "predicted_device_bytes", devices);
      c.measured_peak_bytes = busiest(e, "measured_device_bytes", devices);
    } else {
      c.name = fmt::format("{}", fmt::join(e.at("labels").as<std::vector<std::string>>(), ", "));
      const int stages = static_cast<int>(e.at("stages").integer(1, kMaxTimelineStages));
      // Stages are devices; interleaved, the balance lists each device's stages, whole rounds.
      if (balance_stages % stages != 0 || (schedule != "interleaved" && balance_stages != stages)) {
        e.at("balance").fail(fmt::format("has {} for {} of {}",
                                         count_of(balance_stages, "stage", "stages"),
                                         count_of(stages, "stage", "stages"), schedule));
      }
      const int threads = static_cast<int>(
          e.has("threads_per_stage") ? e.at("threads_per_stage").integer(0, 4096) : 0);
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
