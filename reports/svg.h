// Small building blocks for the HTML report's inline SVG charts: escaping, number and byte
// formatting, axis ticks, and an SVG element writer. No JavaScript, no external resources.
#pragma once

#include <cstdint>
#include <string>

#include <string_view>
#include <vector>
#include "pipebal/common/format_bytes.h"

namespace pipebal::reports {

// The report's colours, one place so the charts, legends and tables agree.
namespace palette {
inline constexpr const char* kForward = "#4c78a8";
inline constexpr const char* kRecompute = "#9e9ac8";
inline constexpr const char* kBackward = "#f58518";
inline constexpr const char* kWeight = "#e45756";  // W: a split backward's weight gradients
inline constexpr const char* kPredicted = "#9ecae9";
inline constexpr const char* kMeasured = "#2f6ea5";
inline constexpr const char* kPredictedInTurns = "#6baed6";  // from a profile taken between runs
inline constexpr const char* kCap = "#d62728";
inline constexpr const char* kAxis = "#5f6b7a";
inline constexpr const char* kGrid = "#e5e9f0";
inline constexpr const char* kText = "#1f2933";
inline constexpr const char* kMuted = "#6b7785";
// Distinct colours for the candidates' stage boundaries, in candidate order (wraps around).
const char* candidate(size_t index);
}  // namespace palette

// Escapes &, <, >, " and ' so that any text (model names come from JSON) is inert in HTML
// element content and attribute values alike.
std::string escape_html(std::string_view text);

// "71.0", "7.10", "0.712", "0": three significant digits, no exponent, for milliseconds.
std::string format_ms(double ms);
// An axis tick: "0", "2.5", "80", "0.05" (no trailing zeros).
std::string format_tick(double value);
// "+9.4%", "-2.0%", for a relative value (0.094).
std::string format_percent(double fraction);

// Round-numbered ticks 0, step, 2 step, ... covering [0, max] with about `target` intervals
// (steps of 1, 2 or 5 times a power of ten). max <= 0 gives {0, 1}.
std::vector<double> nice_ticks(double max, int target);
// Round-numbered ticks, multiples of one step, covering [low, high] (and 0 when low <= 0 <=
// high). An empty, inverted or undrawable span (beyond kMaxDrawnValue) gives {0, 1}.
std::vector<double> nice_ticks(double low, double high, int target);
// Values of larger magnitude are not drawn: spans and ticks of them would overflow.
constexpr double kMaxDrawnValue = 1e300;

// How a text element is drawn; the defaults suit axis labels.
struct TextStyle {
  const char* anchor = "start";  // SVG text-anchor: start, middle or end
  double size = 12;
  const char* fill = palette::kText;
  bool bold = false;
  double rotate_deg = 0;          // around the text's anchor point
  const char* baseline = "auto";  // dominant-baseline: auto, middle, hanging
  bool halo = false;              // a white outline, for labels that may cross lines
};

// Appends SVG elements to a string; `str()` wraps them in an <svg> with a viewBox, so the
// chart scales with its container (width:100% in the page's CSS). `title` is the accessible
// name; element titles become native hover tooltips without JavaScript.
class Svg {
 public:
  Svg(double width, double height, std::string title);

  void rect(double x, double y, double width, double height, const char* fill,
            std::string_view tooltip = {});
  void line(double x1, double y1, double x2, double y2, const char* stroke, double stroke_width = 1,
            const char* dash = nullptr);
  void text(double x, double y, std::string_view content, const TextStyle& style = {});
  // A small legend swatch followed by its label; returns the x just past the label.
  double legend_item(double x, double y, const char* fill, std::string_view label,
                     const char* dash = nullptr);

  double width() const { return width_; }
  double height() const { return height_; }
  std::string str() const;

 private:
  double width_;
  double height_;
  std::string title_;
  std::string body_;
};

// The width a label of `chars` characters takes at `size` px in the report's sans-serif font,
// roughly: enough to decide whether a label fits inside a box.
double text_width(size_t chars, double size);

}  // namespace pipebal::reports
