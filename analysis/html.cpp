#include "analysis/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace fwlab::html {

std::string esc(std::string_view text) {
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

namespace {

const char* kStyle = R"CSS(
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; } th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th { background: #f4f4f4; } td.label, th.label { text-align: left; }
a { color: #0550ae; text-decoration: none; } a:hover { text-decoration: underline; }
pre { background: #f7f7f7; padding: .8em; overflow-x: auto; font-size: 12.5px; }
td code { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
.status-finished { color: #116329; } .status-diverged, .status-failed, .status-crashed { color: #a40e26; }
.status-running, .status-pending, .status-submitted { color: #9a6700; }
nav { font-size: .9em; margin-bottom: 1em; } img.plot, svg.chart { max-width: 100%; height: auto; display: block; margin: .5em 0; }
.curves { display: flex; flex-wrap: wrap; gap: 0 1.5em; } .curves svg.chart { width: 47%; min-width: 24em; }
p.filter { margin: .2em 0; }
)CSS";

}  // namespace

const char* kContentPolicy = "default-src 'none'; img-src data:; style-src 'unsafe-inline'";

std::string page(const std::string& title, const std::string& body, int refresh_s) {
  const auto refresh =
      refresh_s > 0 ? fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">\n", refresh_s) : std::string();
  // The policy forbids every script and every fetch: a string that escaped escaping still could not run.
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n{}<title>{}</title>\n<style>{}</style>\n"
      "</head>\n<body>\n{}\n</body>\n</html>\n",
      kContentPolicy, refresh, esc(title), kStyle, body);
}

namespace {

const char* kColours[] = {"#0550ae", "#cf222e", "#116329", "#8250df", "#9a6700", "#1b7c83", "#bc4c00", "#57606a"};

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  double span() const { return hi > lo ? hi - lo : 1.0; }
};

}  // namespace

namespace {

// Where a chart's points go: the data ranges mapped into the plot area (value axis logarithmic on request).
struct Frame {
  static constexpr double W = 640, H = 300, left = 64, right = 12, top = 28, bottom = 36;
  Range xs, ys;
  bool log_y = false;
  double fy(double y) const { return log_y ? std::log10(y) : y; }
  double px(double x) const { return left + (x - xs.lo) / xs.span() * (W - left - right); }
  double py(double y) const {
    const Range t{fy(ys.lo), fy(ys.hi)};
    return top + (1.0 - (fy(y) - t.lo) / t.span()) * (H - top - bottom);
  }
};

Frame frame_of(const std::vector<Series>& series, bool log_y) {
  Frame f;
  bool positive = true;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) f.xs.add(x), f.ys.add(y), positive = positive && y > 0;
    if (s.stopped_at) f.xs.add(*s.stopped_at);
  }
  f.log_y = log_y && positive && std::isfinite(f.ys.lo);
  if (std::isfinite(f.xs.lo) && !std::isfinite(f.ys.lo)) f.ys.add(0), f.ys.add(1);  // only crosses: any scale
  return f;
}

// The plot box, the value axis's ends and its name (rotated, with "log scale" where it is), the step range.
std::string axes_svg(const Frame& f, const std::string& y_name) {
  using F = Frame;
  std::string svg = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n",
                                F::left, F::top, F::W - F::left - F::right, F::H - F::top - F::bottom);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.4g}</text>\n", F::left - 4,
                     F::top + 10, f.ys.hi);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.4g}</text>\n", F::left - 4,
                     F::H - F::bottom, f.ys.lo);
  const double mid = (F::H - F::bottom + F::top) / 2;
  svg += fmt::format(
      "<text x=\"12\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" transform=\"rotate(-90 12 {})\">{}{}</text>\n",
      mid, mid, esc(y_name), f.log_y ? " (log scale)" : "");
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{:.6g}</text>\n", F::left, F::H - F::bottom + 14, f.xs.lo);
  return svg + fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">step {:.6g}</text>\n",
                           F::W - F::right, F::H - F::bottom + 14, f.xs.hi);
}

// One series: its line, a dot per point (up to 40 points), its cross where it diverged, and its legend entry
// (row `i` below the plot).
std::string series_svg(const Frame& f, const Series& s, size_t i) {
  const auto* colour = kColours[i % std::size(kColours)];
  const bool dashed = i / std::size(kColours) % 2 == 1;  // the colours' second round is dashed
  std::string points, dots;
  std::optional<std::pair<double, double>> last;
  for (const auto& [x, y] : s.points) {
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    points += fmt::format("{:.1f},{:.1f} ", f.px(x), f.py(y));
    if (s.points.size() <= 40) dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\"/>", f.px(x), f.py(y));
    last = {x, y};
  }
  std::string svg = fmt::format(
      "<g class=\"series\" fill=\"{0}\" stroke=\"{0}\"><title>{1}</title>\n<polyline fill=\"none\" "
      "stroke-width=\"1.5\"{4} points=\"{2}\"/>{3}\n",
      colour, esc(s.name), points, dots, dashed ? " stroke-dasharray=\"5 3\"" : "");
  std::string legend = esc(s.name);
  if (s.stopped_at) {
    const double x = f.px(*s.stopped_at), y = last ? f.py(last->second) : Frame::top + 6;
    svg += fmt::format("<path class=\"diverged\" stroke-width=\"2.5\" d=\"M{0:.1f} {1:.1f}l10 10m0 -10l-10 10\"/>\n",
                       x - 5, y - 5);
    legend += fmt::format(" — diverged at step {:.6g} ×", *s.stopped_at);
  }
  const double ly = Frame::H + 4 + 14 * static_cast<double>(i);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke-width=\"3\"{3}/>", Frame::left, ly - 3,
                     Frame::left + 16, dashed ? " stroke-dasharray=\"5 3\"" : "");
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" stroke=\"none\">{}</text>\n", Frame::left + 20, ly, legend);
  return svg + "</g>\n";
}

}  // namespace

std::string line_chart(const std::string& title, const std::vector<Series>& series, bool log_y) {
  const auto f = frame_of(series, log_y);
  const double height = Frame::H + 10 + 14 * static_cast<double>(series.size());
  std::string svg = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\" data-series=\"{3}\">\n<text x=\"{4}\" y=\"18\" "
      "font-size=\"13\">{2}</text>\n",
      Frame::W, height, esc(title), series.size(), Frame::left);
  if (!std::isfinite(f.xs.lo))
    return svg + fmt::format("<text x=\"{}\" y=\"{}\">no points</text>\n</svg>\n", Frame::left, Frame::H / 2);
  svg += axes_svg(f, title);
  for (size_t i = 0; i < series.size(); ++i) svg += series_svg(f, series[i], i);
  return svg + "</svg>\n";
}

bool spans_decades(const std::vector<Series>& series) {
  Range ys;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y)) {
        if (y <= 0) return false;
        ys.add(y);
      }
  return std::isfinite(ys.lo) && ys.hi > 10 * ys.lo;
}

std::string bar_chart(const std::string& title, const std::vector<Bar>& bars) {
  constexpr double W = 640, label_w = 200, bar_w = 300, row = 18, top = 26;
  const double height = top + row * static_cast<double>(bars.size()) + 8;
  std::string svg = fmt::format(
      "<svg class=\"chart bars\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\">\n<text x=\"4\" y=\"16\" font-size=\"13\">{2}</text>\n",
      W, height, esc(title));
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = top + row * static_cast<double>(i), v = std::clamp(bars[i].value, 0.0, 1.0);
    svg += fmt::format(
        "<g class=\"bar\"><text x=\"{0}\" y=\"{1}\" font-size=\"11\" text-anchor=\"end\">{2}</text>"
        "<rect x=\"{3}\" y=\"{4}\" width=\"{5}\" height=\"12\" fill=\"#eee\"/>"
        "<rect x=\"{3}\" y=\"{4}\" width=\"{6:.1f}\" height=\"12\" fill=\"#cf222e\"/>"
        "<text x=\"{7}\" y=\"{1}\" font-size=\"11\">{8}</text></g>\n",
        label_w - 6, y + 10, esc(bars[i].label), label_w, y, bar_w, v * bar_w, label_w + bar_w + 6, esc(bars[i].note));
  }
  return svg + "</svg>\n";
}

std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

}  // namespace fwlab::html
