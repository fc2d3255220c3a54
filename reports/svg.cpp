// See svg.h.
#include "pipebal/reports/svg.h"

#include <cmath>

#include <fmt/format.h>

namespace pipebal::reports {

namespace palette {
const char* candidate(size_t index) {
  // Tableau-like, chosen to stay apart from the forward/backward bar colours they cross.
  static constexpr const char* kColors[] = {"#d62728", "#2ca02c", "#9467bd",
                                            "#8c564b", "#e377c2", "#17becf"};
  return kColors[index % (sizeof(kColors) / sizeof(kColors[0]))];
}
}  // namespace palette

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_ms(double ms) {
  if (!std::isfinite(ms)) return "-";
  const double magnitude = std::fabs(ms);
  if (magnitude == 0) return "0";
  if (magnitude >= 100) return fmt::format("{:.0f}", ms);
  if (magnitude >= 10) return fmt::format("{:.1f}", ms);
  if (magnitude >= 1) return fmt::format("{:.2f}", ms);
  return fmt::format("{:.3f}", ms);
}

std::string format_tick(double value) {
  // Ticks are multiples of 1, 2 or 5 times a power of ten: six significant digits are exact.
  if (std::fabs(value) < 1e-12) return "0";
  return fmt::format("{:.6g}", value);
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return fmt::format("{:+.1f}%", 100.0 * fraction);
}

std::vector<double> nice_ticks(double max, int target) {
  return nice_ticks(0, max, target);
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(low < high) || !(std::abs(low) <= kMaxDrawnValue) || !(std::abs(high) <= kMaxDrawnValue))
    return {0, 1};
  const double raw = (high - low) / std::max(target, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * power;
    if (step >= raw) break;
  }
  // The small tolerance keeps an end that is a multiple of step from adding one more interval.
  const double first = std::floor(low / step + 1e-9);
  const double last = std::ceil(high / step - 1e-9);
  // A span too narrow for where it lies (the steps would not count exactly).
  if (last - first > 1000 || std::abs(first) > 1e15 || std::abs(last) > 1e15) return {0, 1};
  std::vector<double> ticks;
  for (double i = first; i <= last; ++i) ticks.push_back(i * step);
  return ticks;
}

double text_width(size_t chars, double size) {
  return 0.58 * size * static_cast<double>(chars);
}

Svg::Svg(double width, double height, std::string title)
    : width_(width), height_(height), title_(std::move(title)) {}

void Svg::rect(double x, double y, double width, double height, const char* fill,
               std::string_view tooltip) {
  if (tooltip.empty()) {
    body_ +=
        fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.2f}" height="{:.2f}" fill="{}"/>)", x,
                    y, width, height, fill);
  } else {
    body_ += fmt::format(
        R"(<rect x="{:.1f}" y="{:.1f}" width="{:.2f}" height="{:.2f}" fill="{}"><title>{}</title></rect>)",
        x, y, width, height, fill, escape_html(tooltip));
  }
  body_ += '\n';
}

void Svg::line(double x1, double y1, double x2, double y2, const char* stroke, double stroke_width,
               const char* dash) {
  body_ += fmt::format(
      R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"{}/>)",
      x1, y1, x2, y2, stroke, stroke_width,
      dash ? fmt::format(R"( stroke-dasharray="{}")", dash) : std::string());
  body_ += '\n';
}

void Svg::text(double x, double y, std::string_view content, const TextStyle& style) {
  const std::string rotate =
      style.rotate_deg != 0
          ? fmt::format(" transform=\"rotate({} {:.1f} {:.1f})\"", style.rotate_deg, x, y)
          : std::string();
  body_ += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" fill="{}" text-anchor="{}"{}{}{}{}>{}</text>)",
      x, y, style.size, style.fill, style.anchor, style.bold ? R"( font-weight="600")" : "",
      style.halo ? R"( stroke="#fff" stroke-width="3" paint-order="stroke")" : "",
      std::string_view(style.baseline) == "auto"
          ? std::string()
          : fmt::format(R"( dominant-baseline="{}")", style.baseline),
      rotate, escape_html(content));
  body_ += '\n';
}

double Svg::legend_item(double x, double y, const char* fill, std::string_view label,
                        const char* dash) {
  if (dash != nullptr) {
    line(x, y, x + 18, y, fill, 2.5, dash);
  } else {
    rect(x, y - 6, 12, 12, fill);
  }
  const double label_x = x + (dash ? 24 : 17);
  TextStyle style;
  style.baseline = "middle";
  text(label_x, y, label, style);
  return label_x + text_width(label.size(), style.size) + 16;
}

std::string Svg::str() const {
  // No width/height attributes: the viewBox alone makes the chart fill its container's width
  // and keep its aspect ratio. role/aria-label make it readable to screen readers.
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {:.0f} {:.0f}" role="img" aria-label="{}">)"
      "\n<title>{}</title>\n{}</svg>\n",
      width_, height_, escape_html(title_), escape_html(title_), body_);
}

}  // namespace pipebal::reports
