// The link model: the fit recovers a known latency and bandwidth, refuses what is no
// measurement, and survives a round trip through JSON; a profile's link prices transfers.
#include "pipebal/balance/link_model.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/json_reader.h"

namespace pipebal::balance {
namespace {

TEST(LinkModel, FitRecoversLatencyAndBandwidthOfExactSamples) {
  std::vector<LinkSample> samples;
  for (int64_t bytes : {640, 65536, 1 << 20, 16 << 20, 64 << 20}) {
    samples.push_back({bytes, 0.05 + static_cast<double>(bytes) / 2e6});  // 2 GB/s, 50 us
  }
  const LinkModel link = fit_link(samples);
  EXPECT_NEAR(link.latency_ms, 0.05, 1e-9);
  EXPECT_NEAR(link.bandwidth_bytes_per_ms, 2e6, 1e-3);
  EXPECT_NEAR(link.transfer_ms(1 << 20), 0.05 + (1 << 20) / 2e6, 1e-9);
}

TEST(LinkModel, SmallMessagesStillFixTheLatencyUnderNoise) {
  // 10% noise on alternate sizes: the latency stays within the noise of the small messages.
  std::vector<LinkSample> samples;
  int i = 0;
  for (int64_t bytes : {1024, 4096, 65536, 1 << 20, 16 << 20, 64 << 20}) {
    const double noise = (i++ % 2 == 0) ? 1.1 : 0.9;
    samples.push_back({bytes, (0.03 + static_cast<double>(bytes) / 3e6) * noise});
  }
  const LinkModel link = fit_link(samples);
  EXPECT_GT(link.latency_ms, 0.02);
  EXPECT_LT(link.latency_ms, 0.04);
  EXPECT_NEAR(link.bandwidth_bytes_per_ms, 3e6, 0.15 * 3e6);
}

TEST(LinkModel, RefusesWhatIsNoMeasurement) {
  EXPECT_THROW(fit_link({{1024, 1.0}}), std::invalid_argument);
  EXPECT_THROW(fit_link({{1024, 1.0}, {1024, 2.0}}), std::invalid_argument);
  try {
    fit_link({{1024, 2.0}, {4096, 1.0}});  // shrinks
    ADD_FAILURE() << "fitted a link whose times shrink";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("no bandwidth fits them: measure sizes further apart"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(fit_link({{1024, -1.0}, {4096, 1.0}}), std::invalid_argument);
}

TEST(LinkModel, RoundTripsThroughJsonAndRejectsNonsense) {
  const LinkModel link = fit_link({{1000, 1.0}, {2000, 1.5}});
  const nlohmann::json written = link_to_json(link);
  const LinkModel back = link_from_json(JsonReader(written, "link.json"));
  EXPECT_DOUBLE_EQ(back.latency_ms, link.latency_ms);
  EXPECT_DOUBLE_EQ(back.bandwidth_bytes_per_ms, link.bandwidth_bytes_per_ms);
  ASSERT_EQ(back.samples.size(), 2u);
  const auto error_of = [](const nlohmann::json& doc) -> std::string {
    try {
      link_from_json(JsonReader(doc, "link.json"));
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of({{"latency_ms", 0.1}}), "link.json: missing \"bandwidth_bytes_per_ms\"");
  EXPECT_EQ(error_of({{"latency_ms", -1}, {"bandwidth_bytes_per_ms", 1e6}}),
            "link.json: latency_ms is -1, expected 0 to 1e+06");
  EXPECT_EQ(error_of({{"latency_ms", 0}, {"bandwidth_bytes_per_ms", 0}}),
            "link.json: bandwidth_bytes_per_ms is 0, expected 0.001 to 1e+15");
  EXPECT_EQ(error_of({{"latency_ms", 0},
                      {"bandwidth_bytes_per_ms", 1},
                      {"samples", {{{"bytes", "many"}, {"one_way_ms", 1}}}}}),
            "link.json: samples[0].bytes must be an integer, not string");
}

TEST(LinkModel, AProfilesLinkIsReadAndPricesTransfersWithLatency) {
  nlohmann::json layer = {{"forward_ms", 1.0},
                          {"backward_ms", 1.0},
                          {"param_bytes", 8},
                          {"activation_bytes", 8},
                          {"output_bytes", 1000}};
  const nlohmann::json doc = {{"layers", {layer, layer}},
                              {"link", {{"latency_ms", 0.5}, {"bandwidth_bytes_per_ms", 100.0}}}};
  const CostProfile profile = profile_from_json(doc);
  ASSERT_TRUE(profile.link.has_value());
  CostOptions options;
  options.bandwidth_bytes_per_ms = profile.link->bandwidth_bytes_per_ms;
  options.latency_ms = profile.link->latency_ms;
  const CostModel model(profile.layers, 2, options);
  EXPECT_DOUBLE_EQ(model.transfer_ms(1), 0.5 + 1000 / 100.0);
  EXPECT_DOUBLE_EQ(model.transfer_ms(2), 0);  // after the last layer
  nlohmann::json bad = doc;
  bad["link"]["bandwidth_bytes_per_ms"] = -5;
  EXPECT_THROW(profile_from_json(bad), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::balance
