// A validation.json, run.json or comparison (plans-comparison.json, plan-validation.json), beside
// a valid profile, rendered as `pipebal report` renders it.
#include "fuzz/fuzz_support.h"
#include "pipebal/reports/html_report.h"
#include "pipebal/reports/report_data.h"

namespace {

const char* const kProfile = R"({"schema": "pipebal.profile/1", "model": "m", "batch_size": 4,
  "layers": [{"index": 0, "name": "a", "type": "Linear", "forward_ms": 1, "backward_ms": 2,
              "param_bytes": 64, "activation_bytes": 32, "output_bytes": 16},
             {"index": 1, "name": "b", "type": "ReLU", "forward_ms": 0.5, "backward_ms": 0.5,
              "param_bytes": 0, "activation_bytes": 16, "output_bytes": 16}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto doc = pipebal::fuzz::parse(data, size);
  if (!doc) return 0;
  pipebal::reports::ReportInputs inputs;
  inputs.dir = "fuzz";
  inputs.profile = nlohmann::json::parse(kProfile);
  inputs.validation = *doc;
  pipebal::fuzz::refusing_is_fine([&] { (void)pipebal::reports::render_html_report(inputs); });
  inputs.validation.reset();
  inputs.run = *doc;
  pipebal::fuzz::refusing_is_fine([&] { (void)pipebal::reports::render_html_report(inputs); });
  inputs.run.reset();
  inputs.comparison = *doc;
  inputs.comparison_file = "plans-comparison.json";
  pipebal::fuzz::refusing_is_fine([&] { (void)pipebal::reports::render_html_report(inputs); });
  return 0;
}
