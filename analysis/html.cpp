#include "analysis/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
.status-finished { color: #116329; } .status-diverged, .status-failed, .status-crashed { color: #a40e26; }
.status-running, .status-pending, .status-submitted { color: #9a6700; }
nav { font-size: .9em; margin-bottom: 1em; } img.plot, svg.chart { max-width: 100%; height: auto; display: block; margin: .5em 0; }
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

std::string line_chart(const std::string& title, const std::vector<Series>& series, bool log_y) {
  constexpr double W = 640, H = 300, left = 64, right = 12, top = 28, bottom = 36;
  Range xs, ys;
  bool positive = true;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) xs.add(x), ys.add(y), positive = positive && y > 0;
  log_y = log_y && positive && std::isfinite(ys.lo);
  const auto fy = [&](double y) { return log_y ? std::log10(y) : y; };
  const Range ty{fy(ys.lo), fy(ys.hi)};
  const auto px = [&](double x) { return left + (x - xs.lo) / xs.span() * (W - left - right); };
  const auto py = [&](double y) { return top + (1.0 - (fy(y) - ty.lo) / ty.span()) * (H - top - bottom); };
  std::string svg = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"{}\">\n<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>\n",
      W, H, W, H, esc(title), left, esc(title));
  if (!std::isfinite(xs.lo))
    return svg + fmt::format("<text x=\"{}\" y=\"{}\">no points</text>\n</svg>\n", left, H / 2);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", left, top,
                     W - left - right, H - top - bottom);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.4g}</text>\n", left - 4, top + 10,
                     ys.hi);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.4g}</text>\n", left - 4,
                     H - bottom, ys.lo);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{:.6g}</text>\n", left, H - bottom + 14, xs.lo);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">step {:.6g}</text>\n", W - right,
                     H - bottom + 14, xs.hi);
  for (size_t i = 0; i < series.size(); ++i) {
    std::string points;
    for (const auto& [x, y] : series[i].points)
      if (std::isfinite(x) && std::isfinite(y)) points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    const auto* colour = kColours[i % std::size(kColours)];
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>\n",
        colour, points, esc(series[i].name));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{}\">{}</text>\n", left + 8,
                       top + 14 + 13 * static_cast<double>(i), colour, esc(series[i].name));
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
