// See link_model.h.
#include "pipebal/balance/link_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include "pipebal/common/json_reader.h"

namespace pipebal::balance {

LinkModel fit_link(std::vector<LinkSample> samples) {
  std::set<int64_t> sizes;
  for (const auto& s : samples) {
    if (s.bytes < 0 || !(s.one_way_ms >= 0) || !std::isfinite(s.one_way_ms)) {
      throw std::invalid_argument(fmt::format(
          "link sample of {} bytes in {} ms is not a measurement", s.bytes, s.one_way_ms));
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) throw std::invalid_argument("a link fit needs two message sizes or more");
  // Weighted by 1 / time^2: the fit minimises relative errors, so that the small messages,
  // which fix the latency, count as much as the large ones, which fix the bandwidth.
  double total_w = 0, mean_x = 0, mean_y = 0;
  auto weight = [](const LinkSample& s) {
    const double y = std::max(s.one_way_ms, 1e-9);
    return 1.0 / (y * y);
  };
  for (const auto& s : samples) {
    const double w = weight(s);
    total_w += w;
    mean_x += w * static_cast<double>(s.bytes);
    mean_y += w * s.one_way_ms;
  }
  mean_x /= total_w;
  mean_y /= total_w;
  double sxx = 0, sxy = 0;
  for (const auto& s : samples) {
    const double w = weight(s);
    const double dx = static_cast<double>(s.bytes) - mean_x;
    sxx += w * dx * dx;
    sxy += w * dx * (s.one_way_ms - mean_y);
  }
  const double ms_per_byte = sxy / sxx;
  if (!(ms_per_byte > 0)) {
    throw std::invalid_argument(
        "the link's times do not grow with the message size, so no bandwidth fits them: measure "
        "sizes further apart (`pipebal link` measures 64K to 64M unless given --sizes) or with "
        "more --repeats, on an idle machine");
  }
  LinkModel link;
  link.bandwidth_bytes_per_ms = 1.0 / ms_per_byte;
  link.latency_ms = std::max(0.0, mean_y - ms_per_byte * mean_x);
  std::sort(samples.begin(), samples.end(),
            [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  link.samples = std::move(samples);
  return link;
}

nlohmann::json link_to_json(const LinkModel& link) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : link.samples)
    samples.push_back({{"bytes", s.bytes}, {"one_way_ms", s.one_way_ms}});
  return {{"latency_ms", link.latency_ms},
          {"bandwidth_bytes_per_ms", link.bandwidth_bytes_per_ms},
          {"samples", samples}};
}

LinkModel link_from_json(const JsonReader& r) {
  LinkModel link;
  link.latency_ms = r.at("latency_ms").number(0, 1e6);
  link.bandwidth_bytes_per_ms = r.at("bandwidth_bytes_per_ms").number(1e-3, 1e15);
  if (r.has("samples")) {
    for (const JsonReader& s : r.at("samples").elements()) {
      link.samples.push_back({s.at("bytes").integer(0), s.at("one_way_ms").number(0)});
    }
  }
  return link;
}

}  // namespace pipebal::balance
